//! Access tokens as JWTs (D23): ES256 over `header.payload`, checked strictly.
//!
//! Signing and verification use aws-lc-rs directly rather than a JWT crate: the
//! parsed key pair stays in memory (re-parsing a PKCS#8 document per token
//! costs a quarter of the token endpoint's throughput), and the verifier
//! accepts exactly one algorithm, so `alg: none`, HMAC and key-confusion
//! tricks have no code path to reach.

use aws_lc_rs::rand::SystemRandom;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use gatehouse_domain::mfa::{Authn, Level};
use gatehouse_domain::{ChainId, ClientId, Jti, OrgId, ScopeSet, Timestamp, UserId};
use serde::{Deserialize, Serialize};

use crate::keys::KeySet;
use crate::{ACCESS_TOKEN_TTL_SECS, Issuer, TokenError};

/// What a verified access token says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessClaims {
    pub org: OrgId,
    pub client_id: ClientId,
    /// The user the token acts for; `None` for client credentials.
    pub user: Option<UserId>,
    pub scopes: ScopeSet,
    pub jti: Jti,
    pub iat: i64,
    pub exp: i64,
    /// The refresh chain the token belongs to (`sid`), for grants with a user.
    pub chain: Option<ChainId>,
    /// D56: how the person signed in (`amr`, `acr`); never on client
    /// credentials, nor on chains begun before D56.
    pub authn: Option<Authn>,
    /// D56: when the person last authenticated (`auth_time`, Unix seconds).
    pub auth_time: Option<i64>,
}

impl AccessClaims {
    /// New claims for a token issued now.
    pub fn issue(org: OrgId, client_id: ClientId, user: Option<UserId>, scopes: ScopeSet) -> Self {
        let iat = Timestamp::now().unix_seconds();
        Self {
            org,
            client_id,
            user,
            scopes,
            // aws-lc's DRBG: a CSPRNG in user space, no system call per token.
            jti: Jti::generate_with(|buf| aws_lc_rs::rand::fill(buf).expect("the CSPRNG failed")),
            iat,
            exp: iat + ACCESS_TOKEN_TTL_SECS,
            chain: None,
            authn: None,
            auth_time: None,
        }
    }

    pub fn in_chain(mut self, chain: &ChainId) -> Self {
        self.chain = Some(chain.clone());
        self
    }

    /// D56: the sign-in's `amr`, `acr` and `auth_time`, for a person's token.
    pub fn signed_in(mut self, authn: Option<&Authn>, auth_time: Option<Timestamp>) -> Self {
        self.authn = authn.cloned();
        self.auth_time = auth_time.map(Timestamp::unix_seconds);
        self
    }
}

#[derive(Serialize)]
struct WireOut<'a> {
    iss: &'a str,
    aud: &'a str,
    sub: &'a str,
    client_id: &'a str,
    org: &'a str,
    scope: &'a str,
    jti: &'a str,
    iat: i64,
    exp: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    sid: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    amr: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    acr: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    auth_time: Option<i64>,
}

#[derive(Deserialize)]
struct WireIn {
    iss: String,
    aud: Aud,
    sub: String,
    client_id: String,
    org: String,
    #[serde(default)]
    scope: String,
    jti: String,
    iat: i64,
    exp: i64,
    #[serde(default)]
    sid: Option<String>,
    #[serde(default)]
    amr: Option<Vec<String>>,
    #[serde(default)]
    acr: Option<String>,
    #[serde(default)]
    auth_time: Option<i64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Aud {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
pub(crate) struct Header {
    alg: String,
    kid: Option<String>,
    /// `at+jwt` for access tokens, `JWT` for ID tokens (D49).
    #[serde(default)]
    pub(crate) typ: Option<String>,
}

/// The one signature check of a token this server signed (access tokens,
/// and ID tokens as logout hints, D49): three parts, ES256 only (`none`,
/// HS256 and the rest are refused), a key of the ring by `kid`, a valid
/// signature. Returns the header and the payload's JSON bytes; the caller
/// checks the claims.
pub(crate) fn verified_parts(
    keys: &KeySet,
    token: &str,
    max_len: usize,
) -> Result<(Header, Vec<u8>), TokenError> {
    use TokenError::Invalid;
    if token.len() > max_len {
        return Err(Invalid);
    }
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Invalid);
    };
    let header: Header = B64
        .decode(h)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or(Invalid)?;
    if header.alg != "ES256" {
        return Err(Invalid);
    }
    let key = header
        .kid
        .as_deref()
        .and_then(|k| keys.verifying.get(k))
        .ok_or(Invalid)?;
    let sig = B64.decode(s).map_err(|_| Invalid)?;
    if sig.len() != 64 {
        return Err(Invalid);
    }
    key.verify(&token.as_bytes()[..h.len() + 1 + p.len()], &sig)
        .map_err(|_| Invalid)?;
    let payload = B64.decode(p).map_err(|_| Invalid)?;
    Ok((header, payload))
}

/// Signs `claims` with the current key.
pub fn sign(keys: &KeySet, issuer: &Issuer, rng: &SystemRandom, claims: &AccessClaims) -> String {
    let scope = claims.scopes.to_string();
    let payload = WireOut {
        iss: &issuer.iss,
        aud: &issuer.aud,
        sub: claims
            .user
            .as_ref()
            .map_or(claims.client_id.as_str(), UserId::as_str),
        client_id: claims.client_id.as_str(),
        org: claims.org.as_str(),
        scope: &scope,
        jti: claims.jti.as_str(),
        iat: claims.iat,
        exp: claims.exp,
        sid: claims.chain.as_ref().map(ChainId::as_str),
        amr: claims.authn.as_ref().map(|a| a.amr.as_slice()),
        acr: claims.authn.as_ref().map(|a| a.acr.as_str()),
        auth_time: claims.auth_time,
    };
    let json = serde_json::to_vec(&payload).expect("claims serialize");
    let key = &keys.signing;
    let mut token = String::with_capacity(key.header_b64.len() + json.len() * 4 / 3 + 100);
    token.push_str(&key.header_b64);
    token.push('.');
    B64.encode_string(&json, &mut token);
    let sig = key.sign(rng, token.as_bytes());
    token.push('.');
    B64.encode_string(&sig, &mut token);
    token
}

/// Verifies signature, algorithm, `iss`, `aud` and `exp` (D23).
pub fn verify(
    keys: &KeySet,
    issuer: &Issuer,
    token: &str,
    now_secs: i64,
) -> Result<AccessClaims, TokenError> {
    use TokenError::Invalid;
    let (_, payload) = verified_parts(keys, token, 4096)?;
    let w: WireIn = serde_json::from_slice(&payload).map_err(|_| Invalid)?;
    let aud_ok = match &w.aud {
        Aud::One(a) => *a == issuer.aud,
        Aud::Many(v) => v.contains(&issuer.aud),
    };
    if w.iss != issuer.iss || !aud_ok {
        return Err(Invalid);
    }
    let org = OrgId::parse(&w.org).ok_or(Invalid)?;
    let client_id = ClientId::parse(&w.client_id).ok_or(Invalid)?;
    let user = if w.sub == w.client_id {
        None
    } else {
        Some(UserId::parse(&w.sub).ok_or(Invalid)?)
    };
    let scopes = ScopeSet::parse(&w.scope).map_err(|_| Invalid)?;
    if w.exp <= now_secs {
        return Err(TokenError::Expired);
    }
    Ok(AccessClaims {
        org,
        client_id,
        user,
        scopes,
        // Both were written by this server: the signature vouches for them.
        jti: Jti::from_trusted(w.jti),
        iat: w.iat,
        exp: w.exp,
        chain: w.sid.map(ChainId::from_trusted),
        authn: match (w.amr, w.acr.as_deref().and_then(Level::parse)) {
            (Some(amr), Some(acr)) => Some(Authn { amr, acr }),
            _ => None,
        },
        auth_time: w.auth_time,
    })
}
