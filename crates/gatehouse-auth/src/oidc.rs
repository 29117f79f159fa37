//! OpenID Connect (D49): ID tokens, their hints at logout, the claims of
//! `/oauth/userinfo`, and the `prompt` / `max_age` rules of the
//! authorization request.
//!
//! ID tokens are signed with the same ES256 keys as access tokens (D23) but
//! carry `typ: JWT` and the client as `aud`, so neither kind of token is
//! ever accepted as the other: [`crate::jwt::verify`] wants the API's
//! audience, and [`verify_hint`] wants `typ: JWT` and no `client_id` claim.

use aws_lc_rs::digest;
use aws_lc_rs::rand::SystemRandom;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use gatehouse_domain::auth_state::Session;
use gatehouse_domain::{ClientId, Scope, ScopeSet, Timestamp, User};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use crate::keys::KeySet;
use crate::{ACCESS_TOKEN_TTL_SECS, Issuer};

/// ID tokens live as long as access tokens: `exp` = `iat` + 3600 (D49).
pub const ID_TOKEN_TTL_SECS: i64 = ACCESS_TOKEN_TTL_SECS;

/// Whether the person's address was verified (D49), read with the user.
#[derive(Clone, Debug)]
pub struct Subject<'a> {
    pub user: &'a User,
    pub email_verified: bool,
}

/// The claims of the granted scopes (D49): `profile` gives `name` and
/// `updated_at` (epoch seconds, the one exception to D4), `email` gives
/// `email` and `email_verified`. Shared by ID tokens and userinfo.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct ScopeClaims {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email_verified: Option<bool>,
}

impl ScopeClaims {
    pub fn of(subject: &Subject<'_>, scopes: ScopeSet) -> Self {
        let mut c = ScopeClaims::default();
        if scopes.contains(Scope::Profile) {
            c.name = Some(subject.user.name.as_str().to_owned());
            c.updated_at = Some(subject.user.updated_at.unix_seconds());
        }
        if scopes.contains(Scope::Email) {
            c.email = Some(subject.user.email.as_str().to_owned());
            c.email_verified = Some(subject.email_verified);
        }
        c
    }
}

/// What `/oauth/userinfo` answers (D49): `sub` and the scopes' claims.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct UserInfo {
    pub sub: String,
    #[serde(flatten)]
    pub claims: ScopeClaims,
}

/// The claims of an ID token (D49).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct IdClaims {
    pub iss: String,
    pub sub: String,
    pub aud: String,
    pub exp: i64,
    pub iat: i64,
    pub auth_time: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sid: Option<String>,
    /// D56: how the person signed in (absent for chains begun before D56).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amr: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acr: Option<String>,
    #[serde(flatten, skip_deserializing)]
    pub claims: ScopeClaims,
}

/// What the ID token of a grant is made of, besides the person.
#[derive(Clone, Debug)]
pub struct IdTokenInput<'a> {
    pub client: &'a ClientId,
    pub auth_time: Timestamp,
    pub nonce: Option<&'a str>,
    pub sid: Option<&'a str>,
    pub access_token: &'a str,
    pub scopes: ScopeSet,
    /// D56: the chain's `amr` and `acr`.
    pub authn: Option<&'a gatehouse_domain::mfa::Authn>,
}

/// D56: what a request asks of the level: `acr_values` (space-separated,
/// voluntary; unknown values ignored) and an Essential `acr` in `claims`
/// (`id_token` or `userinfo` member; `value` or `values`; other members
/// ignored). A `claims` that is not a JSON object is an error.
pub fn parse_acr_request(
    acr_values: Option<&str>,
    claims: Option<&str>,
) -> Result<gatehouse_domain::mfa::AcrRequest, &'static str> {
    use gatehouse_domain::mfa::{AcrRequest, Level};
    let voluntary = acr_values
        .unwrap_or("")
        .split(' ')
        .filter_map(Level::parse)
        .collect();
    let mut essential: Option<Vec<Level>> = None;
    if let Some(text) = claims {
        if text.len() > 4096 {
            return Err("claims is too long");
        }
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|_| "claims must be a JSON object")?;
        let obj = v.as_object().ok_or("claims must be a JSON object")?;
        for member in ["id_token", "userinfo"] {
            let Some(acr) = obj.get(member).and_then(|m| m.get("acr")) else {
                continue;
            };
            if acr.get("essential").and_then(serde_json::Value::as_bool) != Some(true) {
                continue;
            }
            // Essential without `value(s)`: any level meets it (OpenID
            // Connect Core §5.5.1), so it asks nothing.
            if acr.get("value").is_none() && acr.get("values").is_none() {
                continue;
            }
            let mut levels: Vec<Level> = Vec::new();
            if let Some(one) = acr.get("value").and_then(serde_json::Value::as_str) {
                levels.extend(Level::parse(one));
            }
            if let Some(many) = acr.get("values").and_then(serde_json::Value::as_array) {
                levels.extend(
                    many.iter()
                        .filter_map(serde_json::Value::as_str)
                        .filter_map(Level::parse),
                );
            }
            essential.get_or_insert_with(Vec::new).extend(levels);
        }
    }
    Ok(AcrRequest {
        voluntary,
        essential,
    })
}

/// OIDC Core §3.1.3.6: the left half of the SHA-256 of the access token,
/// base64url-encoded.
pub fn at_hash(access_token: &str) -> String {
    let d = digest::digest(&digest::SHA256, access_token.as_bytes());
    B64.encode(&d.as_ref()[..16])
}

/// Builds the claims of an ID token issued now.
pub fn id_claims(issuer: &Issuer, subject: &Subject<'_>, input: &IdTokenInput<'_>) -> IdClaims {
    let iat = Timestamp::now().unix_seconds();
    IdClaims {
        iss: issuer.iss.clone(),
        sub: subject.user.id.as_str().to_owned(),
        aud: input.client.as_str().to_owned(),
        exp: iat + ID_TOKEN_TTL_SECS,
        iat,
        auth_time: input.auth_time.unix_seconds(),
        nonce: input.nonce.map(str::to_owned),
        at_hash: Some(at_hash(input.access_token)),
        sid: input.sid.map(str::to_owned),
        amr: input.authn.map(|a| a.amr.clone()),
        acr: input.authn.map(|a| a.acr.as_str().to_owned()),
        claims: ScopeClaims::of(subject, input.scopes),
    }
}

/// Signs ID token claims with the current key (ES256, `typ: JWT`).
pub fn sign(keys: &KeySet, rng: &SystemRandom, claims: &IdClaims) -> String {
    let key = &keys.signing;
    let header = serde_json::json!({"alg": "ES256", "typ": "JWT", "kid": key.kid});
    let mut token = B64.encode(header.to_string());
    token.push('.');
    B64.encode_string(
        serde_json::to_vec(claims).expect("claims serialize"),
        &mut token,
    );
    let sig = key.sign(rng, token.as_bytes());
    token.push('.');
    B64.encode_string(&sig, &mut token);
    token
}

/// A verified `id_token_hint` (D49 logout): its signature and `iss` check
/// out; expiry is not checked (a hint may have expired).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hint {
    pub client: ClientId,
    pub sub: String,
    pub sid: Option<String>,
}

impl Hint {
    /// D49 (revised): whether the hint names this very browser session —
    /// its `sub` the session's person and its `sid` the session's id. Only
    /// then does `/oauth/logout` end the session without asking; another
    /// person's ID token, or one of an earlier session, does not.
    pub fn names(&self, session: &Session) -> bool {
        match &self.sid {
            Some(hinted) => {
                self.sub == session.user.as_str()
                    && bool::from(hinted.as_bytes().ct_eq(session.id.as_str().as_bytes()))
            }
            None => false,
        }
    }
}

#[derive(Deserialize)]
struct HintClaims {
    iss: String,
    sub: String,
    aud: String,
    #[serde(default)]
    sid: Option<String>,
    /// Access tokens carry it; an ID token never does.
    #[serde(default)]
    client_id: Option<serde_json::Value>,
}

/// Checks an `id_token_hint`: ES256 by a key of the ring, `typ: JWT`, this
/// issuer. `None` for anything else.
pub fn verify_hint(keys: &KeySet, issuer: &Issuer, token: &str) -> Option<Hint> {
    // The access tokens' own signature check; an ID token is `typ: JWT`.
    let (header, payload) = crate::jwt::verified_parts(keys, token, 8192).ok()?;
    if header.typ.as_deref() != Some("JWT") {
        return None;
    }
    let claims: HintClaims = serde_json::from_slice(&payload).ok()?;
    if claims.iss != issuer.iss || claims.client_id.is_some() {
        return None;
    }
    Some(Hint {
        client: ClientId::parse(&claims.aud)?,
        sub: claims.sub,
        sid: claims.sid,
    })
}

/// The `prompt` parameter (D49): `none` alone, or any of `login`,
/// `consent`, `select_account`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Prompt {
    pub none: bool,
    pub login: bool,
    pub consent: bool,
}

impl Prompt {
    /// `Err` names why the value is refused (`invalid_request`).
    pub fn parse(raw: Option<&str>) -> Result<Self, &'static str> {
        let mut p = Prompt::default();
        let words: Vec<&str> = raw
            .unwrap_or("")
            .split(' ')
            .filter(|w| !w.is_empty())
            .collect();
        for word in &words {
            match *word {
                "none" => p.none = true,
                "login" => p.login = true,
                "consent" => p.consent = true,
                // Gatehouse has one account per person and organization.
                "select_account" => {}
                _ => return Err("prompt must be none, login, consent or select_account"),
            }
        }
        if p.none && words.len() > 1 {
            return Err("prompt=none cannot be combined with another value");
        }
        Ok(p)
    }
}

/// `max_age` (D49): a non-negative number of seconds.
pub fn parse_max_age(raw: Option<&str>) -> Result<Option<i64>, &'static str> {
    match raw.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => s
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .map(Some)
            .ok_or("max_age must be a non-negative number of seconds"),
    }
}

/// Whether a sign-in at `auth_time` is too old for `max_age` at `now`, or
/// `prompt=login` asks for a fresh one anyway (D49).
pub fn needs_fresh_login(prompt: Prompt, max_age: Option<i64>, auth_time: Timestamp) -> bool {
    if prompt.login {
        return true;
    }
    match max_age {
        Some(age) => Timestamp::now().unix_seconds() - auth_time.unix_seconds() > age,
        None => false,
    }
}

/// D49: whether a remembered consent lets the consent page be skipped for
/// `granted`: it covers every scope, `admin` is never remembered, and
/// `prompt=consent` always shows the page.
pub fn consent_covers(prompt: Prompt, remembered: Option<ScopeSet>, granted: ScopeSet) -> bool {
    if prompt.consent || granted.contains(Scope::Admin) {
        return false;
    }
    remembered.is_some_and(|r| granted.is_subset(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d49_prompt_none_alone_only() {
        assert!(Prompt::parse(Some("none")).unwrap().none);
        assert!(Prompt::parse(Some("none login")).is_err());
        assert!(Prompt::parse(Some("none select_account")).is_err());
        let p = Prompt::parse(Some("login consent")).unwrap();
        assert!(p.login && p.consent && !p.none);
        assert!(Prompt::parse(Some("bogus")).is_err());
        assert_eq!(Prompt::parse(None).unwrap(), Prompt::default());
    }

    #[test]
    fn d49_max_age_is_non_negative_seconds() {
        assert_eq!(parse_max_age(Some("0")), Ok(Some(0)));
        assert_eq!(parse_max_age(Some("3600")), Ok(Some(3600)));
        assert!(parse_max_age(Some("-1")).is_err());
        assert!(parse_max_age(Some("soon")).is_err());
        assert_eq!(parse_max_age(None), Ok(None));
    }

    #[test]
    fn d49_max_age_and_prompt_login_force_a_fresh_sign_in() {
        let an_hour_ago = Timestamp::from_unix_seconds(Timestamp::now().unix_seconds() - 3600);
        assert!(needs_fresh_login(Prompt::default(), Some(60), an_hour_ago));
        assert!(!needs_fresh_login(
            Prompt::default(),
            Some(7200),
            an_hour_ago
        ));
        assert!(!needs_fresh_login(Prompt::default(), None, an_hour_ago));
        let login = Prompt {
            login: true,
            ..Prompt::default()
        };
        assert!(needs_fresh_login(login, None, Timestamp::now()));
    }

    #[test]
    fn d49_remembered_consent_covers_no_more_than_it_granted() {
        let rp = ScopeSet::parse("openid profile").unwrap();
        let none = Prompt::default();
        assert!(consent_covers(
            none,
            Some(rp),
            ScopeSet::parse("openid").unwrap()
        ));
        assert!(!consent_covers(
            none,
            Some(rp),
            ScopeSet::parse("openid email").unwrap()
        ));
        assert!(!consent_covers(
            none,
            None,
            ScopeSet::parse("openid").unwrap()
        ));
        let consent = Prompt {
            consent: true,
            ..Prompt::default()
        };
        assert!(!consent_covers(
            consent,
            Some(rp),
            ScopeSet::parse("openid").unwrap()
        ));
        let admin = ScopeSet::parse("admin").unwrap();
        assert!(!consent_covers(none, Some(admin), admin));
    }

    #[test]
    fn at_hash_is_the_left_half_of_sha256() {
        // OIDC Core's own example is for RS256 (SHA-256 too).
        assert_eq!(
            at_hash("jHkWEdUXMU1BwAsC4vtUsZwnNvTIxEl0z9K3vx5KF0Y"),
            "77QmUPtjPfzWtF2AnpK9RQ"
        );
    }
}
