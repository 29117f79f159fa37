//! The one reader of `application/x-www-form-urlencoded` bodies, used by the
//! token and revocation endpoints and by every HTML form (sign-in, consent,
//! invitation, password reset), and of the query strings of the sign-in
//! pages (`/oauth/authorize`, `/oauth/logout`, `/password/forgot`, the
//! dashboard's callback). A parameter given twice is refused (D45, D45
//! continued); only `/oauth/authorize` reads on to find where to send the
//! refusal. Each caller words the problems its own way: an RFC 6749 error
//! for OAuth, a message page for a person.

use std::collections::{HashMap, HashSet};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, Uri, header};
use serde::de::value::{Error as DeError, MapDeserializer};
use serde::de::{DeserializeOwned, Deserializer, IntoDeserializer, Visitor};

use super::limits::MAX_BODY;
use super::transport::BodyProblem;

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

/// Forms of up to this many pairs find their repeated names by comparing
/// every pair with every other (no allocation); larger ones count in a map.
const PAIRWISE: usize = 16;

/// A form body (or a query string): the parameters sent once, in the order
/// sent, and the names sent more than once, whose values are all dropped.
#[derive(Clone, Debug, Default)]
pub struct Form {
    pairs: Vec<(String, String)>,
    repeated: Vec<String>,
}

impl Form {
    /// A parameter's value; an empty value reads as absent (RFC 6749 §3.1).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.value(name).filter(|v| !v.is_empty())
    }

    /// A parameter's value as sent, empty or not.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The form as the parameter type `T` (unknown parameters ignored, RFC
    /// 6749 §3.1); an empty value reads as absent, as with [`Form::get`].
    /// Deserialized straight from the decoded pairs: the form is not
    /// encoded and parsed a second time on the token endpoint's hot path.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, FormProblem> {
        let given = self
            .pairs
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.as_str(), Value(v.as_str())));
        T::deserialize(MapDeserializer::<_, DeError>::new(given))
            .map_err(|_| FormProblem::Undecodable)
    }

    /// The names sent more than once (only a form read with
    /// [`Form::read_reporting`] or [`Form::parse_reporting`] has any).
    pub fn repeated(&self) -> &[String] {
        &self.repeated
    }

    /// Reads the form from a request already split into head and body; a
    /// parameter given twice is refused.
    pub async fn read(headers: &HeaderMap, body: Body) -> Result<Self, FormProblem> {
        Self::read_reporting(headers, body).await?.refuse_repeated()
    }

    /// [`Form::read`], reporting a repeated parameter in [`Form::repeated`]
    /// instead of refusing the form: for `/oauth/authorize`, which must
    /// still read `client_id` and `redirect_uri` to know where its
    /// `invalid_request` may go (D45 continued).
    pub async fn read_reporting(headers: &HeaderMap, body: Body) -> Result<Self, FormProblem> {
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
        Self::parse_reporting(&bytes)
    }

    /// Decodes a form body or a query string; a parameter given twice is
    /// refused.
    pub fn parse(bytes: &[u8]) -> Result<Self, FormProblem> {
        Self::parse_reporting(bytes)?.refuse_repeated()
    }

    /// Decodes a form body or a query string, setting aside every name sent
    /// more than once (D45, D45 continued: an ambiguous parameter is never
    /// guessed at — neither its first nor its last value is taken). The one
    /// place repeated parameters are found.
    pub fn parse_reporting(bytes: &[u8]) -> Result<Self, FormProblem> {
        let all: Vec<(String, String)> =
            serde_urlencoded::from_bytes(bytes).map_err(|_| FormProblem::Undecodable)?;
        // How often each pair's name was sent. The token endpoint's few
        // parameters are compared pairwise, with no allocation on its hot
        // path; a larger form (up to 64 KiB of short pairs) is counted in a
        // map, so it costs linear time.
        let times: Vec<usize> = if all.len() <= PAIRWISE {
            all.iter()
                .map(|(k, _)| all.iter().filter(|(k2, _)| k2 == k).count())
                .collect()
        } else {
            let mut map: HashMap<&str, usize> = HashMap::with_capacity(all.len());
            for (k, _) in &all {
                *map.entry(k.as_str()).or_default() += 1;
            }
            all.iter().map(|(k, _)| map[k.as_str()]).collect()
        };
        let mut form = Self {
            pairs: Vec::with_capacity(all.len()),
            repeated: Vec::new(),
        };
        let mut reported: HashSet<String> = HashSet::new();
        for ((k, v), n) in all.into_iter().zip(times) {
            if n == 1 {
                form.pairs.push((k, v));
            } else if reported.insert(k.clone()) {
                // A repeated name is reported once, where it first appears.
                form.repeated.push(k);
            }
        }
        Ok(form)
    }

    fn refuse_repeated(self) -> Result<Self, FormProblem> {
        match self.repeated.first() {
            Some(name) => Err(FormProblem::Repeated(name.clone())),
            None => Ok(self),
        }
    }
}

/// One decoded form value as a deserializer: a string, which an `Option`
/// field reads as present (absent parameters are simply not in the map).
struct Value<'a>(&'a str);

impl<'de> IntoDeserializer<'de, DeError> for Value<'de> {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> Deserializer<'de> for Value<'de> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_borrowed_str(self.0)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_some(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// The form of a page's POST (the one form reader, [`Form`]); `Err` is the
/// message to show. A field given twice is refused (D45 continued).
pub async fn read_form(req: Request) -> Result<(HeaderMap, Form), &'static str> {
    let (parts, body) = req.into_parts();
    let form = Form::read(&parts.headers, body)
        .await
        .map_err(form_problem)?;
    Ok((parts.headers, form))
}

/// The query of a page's GET, read like a form: a parameter given twice is
/// refused (D45 continued); `Err` is the message to show.
pub fn read_query(uri: &Uri) -> Result<Form, &'static str> {
    Form::parse(uri.query().unwrap_or("").as_bytes()).map_err(|p| match p {
        FormProblem::Repeated(_) => "The address has a parameter twice.",
        _ => "The address cannot be read.",
    })
}

/// What a page says about a form it cannot take.
pub fn form_problem(p: FormProblem) -> &'static str {
    match p {
        FormProblem::NotAForm => "The form was not sent as a form.",
        FormProblem::Incomplete => "The form was not received in full.",
        FormProblem::TooLarge => "The form is too large.",
        FormProblem::Undecodable => "The form cannot be read.",
        FormProblem::Repeated(_) => "The form has a field twice.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, serde::Deserialize, PartialEq)]
    struct Params {
        #[serde(default)]
        grant_type: Option<String>,
        #[serde(default)]
        scope: Option<String>,
    }

    #[test]
    fn decode_reads_values_ignores_unknown_and_treats_empty_as_absent() {
        let form = Form::parse(b"grant_type=client_credentials&scope=&extra=1&x=%20").unwrap();
        let p: Params = form.decode().unwrap();
        assert_eq!(
            p,
            Params {
                grant_type: Some("client_credentials".into()),
                scope: None,
            }
        );
    }

    #[test]
    fn decode_keeps_percent_decoded_text() {
        let form = Form::parse(b"scope=users%3Aread+users%3Awrite").unwrap();
        let p: Params = form.decode().unwrap();
        assert_eq!(p.scope.as_deref(), Some("users:read users:write"));
    }

    #[test]
    fn a_repeated_parameter_is_refused() {
        assert_eq!(
            Form::parse(b"scope=a&scope=b").unwrap_err(),
            FormProblem::Repeated("scope".into())
        );
    }

    #[test]
    fn a_repeated_parameter_is_reported_with_none_of_its_values() {
        let form = Form::parse_reporting(b"state=1&client_id=c&state=2&x=&x=&state=3").unwrap();
        assert_eq!(form.repeated(), ["state", "x"]);
        assert_eq!(form.value("state"), None, "neither the first nor the last");
        assert_eq!(form.value("x"), None);
        assert_eq!(form.get("client_id"), Some("c"));
        assert!(
            Form::parse_reporting(b"a=1&b=2")
                .unwrap()
                .repeated()
                .is_empty()
        );
    }
}
