//! The one reader of `application/x-www-form-urlencoded` bodies, used by the
//! token and revocation endpoints and by every HTML form (sign-in, consent,
//! invitation, password reset). Each caller words the problems its own way:
//! an RFC 6749 error for OAuth, a message page for a person.

use axum::body::Body;
use axum::http::{HeaderMap, header};
use serde::de::DeserializeOwned;

use crate::extract::MAX_BODY;
use crate::transport::BodyProblem;

/// Why a form body was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormProblem {
    /// No `Content-Type: application/x-www-form-urlencoded`.
    NotAForm,
    /// The body ended before its declared length.
    Incomplete,
    /// Over 64 KiB (D8).
    TooLarge,
    /// Not decodable as a form.
    Undecodable,
    /// D45: a parameter given twice is ambiguous, never guessed at.
    Repeated(String),
}

/// A form body: every parameter at most once, in the order sent.
#[derive(Clone, Debug)]
pub struct Form(Vec<(String, String)>);

impl Form {
    /// A parameter's value; an empty value reads as absent (RFC 6749 §3.1).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.value(name).filter(|v| !v.is_empty())
    }

    /// A parameter's value as sent, empty or not.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The form as the parameter type `T` (unknown parameters ignored, RFC
    /// 6749 §3.1); an empty value reads as absent, as with [`Form::get`].
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, FormProblem> {
        let given: Vec<(&str, &str)> = self
            .0
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let encoded = serde_urlencoded::to_string(given).map_err(|_| FormProblem::Undecodable)?;
        serde_urlencoded::from_str(&encoded).map_err(|_| FormProblem::Undecodable)
    }

    /// Reads the form from a request already split into head and body.
    pub async fn read(headers: &HeaderMap, body: Body) -> Result<Self, FormProblem> {
        let is_form = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or("").trim())
            .is_some_and(|m| m.eq_ignore_ascii_case("application/x-www-form-urlencoded"));
        if !is_form {
            return Err(FormProblem::NotAForm);
        }
        let bytes =
            axum::body::to_bytes(body, MAX_BODY)
                .await
                .map_err(|e| match BodyProblem::of(&e) {
                    Some(BodyProblem::Incomplete) => FormProblem::Incomplete,
                    _ => FormProblem::TooLarge,
                })?;
        Self::parse(&bytes)
    }

    /// Decodes a form body; a parameter given twice is refused.
    pub fn parse(bytes: &[u8]) -> Result<Self, FormProblem> {
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_bytes(bytes).map_err(|_| FormProblem::Undecodable)?;
        for (i, (k, _)) in pairs.iter().enumerate() {
            if pairs[..i].iter().any(|(k2, _)| k2 == k) {
                return Err(FormProblem::Repeated(k.clone()));
            }
        }
        Ok(Self(pairs))
    }
}
