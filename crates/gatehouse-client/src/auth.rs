//! Credentials, the access-token cache, and the authorization-code helpers
//! (interface.md §4.5, §5; D20, D24, D27).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde::Deserialize;
use sha2::Digest as _;
use url::Url;

/// How the client authenticates.
///
/// ```
/// use gatehouse_client::Credentials;
///
/// let machine = Credentials::client_credentials("app_123", "secret", ["users:read"]);
/// let key = Credentials::api_key("gk_live_abc");
/// let person = Credentials::refresh_token("app_123", Some("secret"), "rt_abc");
/// # let _ = (machine, key, person);
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub enum Credentials {
    /// The client-credentials grant: a confidential application acting for
    /// itself. Tokens are fetched and refreshed by the client.
    ClientCredentials {
        /// `app_…`
        client_id: String,
        /// The application's secret.
        client_secret: String,
        /// The scopes asked for; empty asks for the application's default.
        scopes: Vec<String>,
    },
    /// A refresh token from the authorization-code flow, acting for the
    /// person who signed in. Every refresh rotates it (D24); the newest is
    /// available from [`Client::refresh_token`](crate::Client::refresh_token)
    /// and the [`on_refresh_token`](crate::ClientBuilder::on_refresh_token)
    /// callback, and must be stored by the caller for the next run.
    RefreshToken {
        /// `app_…`
        client_id: String,
        /// The secret of a confidential application; `None` for a public one.
        client_secret: Option<String>,
        /// `rt_…`
        refresh_token: String,
    },
    /// An authorization code to exchange first (with its PKCE verifier);
    /// then the refresh token it yields, as for
    /// [`Credentials::RefreshToken`].
    AuthorizationCode {
        /// `app_…`
        client_id: String,
        /// The secret of a confidential application; `None` for a public one.
        client_secret: Option<String>,
        /// The code from the redirect.
        code: String,
        /// The verifier of [`AuthorizationRequest::code_verifier`].
        code_verifier: String,
        /// The redirect URI the authorization request used.
        redirect_uri: String,
    },
    /// An API key (`gk_live_…`, D27), sent as the bearer token as is.
    ApiKey(String),
    /// An access token obtained elsewhere, used as is and never refreshed.
    AccessToken(String),
}

impl Credentials {
    /// The client-credentials grant.
    pub fn client_credentials<S: Into<String>>(
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
        scopes: impl IntoIterator<Item = S>,
    ) -> Self {
        Credentials::ClientCredentials {
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            scopes: scopes.into_iter().map(Into::into).collect(),
        }
    }

    /// A refresh token from an earlier authorization-code flow.
    pub fn refresh_token(
        client_id: impl Into<String>,
        client_secret: Option<&str>,
        refresh_token: impl Into<String>,
    ) -> Self {
        Credentials::RefreshToken {
            client_id: client_id.into(),
            client_secret: client_secret.map(str::to_owned),
            refresh_token: refresh_token.into(),
        }
    }

    /// An API key.
    pub fn api_key(key: impl Into<String>) -> Self {
        Credentials::ApiKey(key.into())
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Secrets stay out of logs.
        match self {
            Credentials::ClientCredentials {
                client_id, scopes, ..
            } => f
                .debug_struct("ClientCredentials")
                .field("client_id", client_id)
                .field("scopes", scopes)
                .finish_non_exhaustive(),
            Credentials::RefreshToken { client_id, .. } => f
                .debug_struct("RefreshToken")
                .field("client_id", client_id)
                .finish_non_exhaustive(),
            Credentials::AuthorizationCode { client_id, .. } => f
                .debug_struct("AuthorizationCode")
                .field("client_id", client_id)
                .finish_non_exhaustive(),
            Credentials::ApiKey(_) => f.write_str("ApiKey(..)"),
            Credentials::AccessToken(_) => f.write_str("AccessToken(..)"),
        }
    }
}

/// The token endpoint's answer (interface.md §2.4).
#[derive(Deserialize)]
pub(crate) struct TokenResponse {
    pub(crate) access_token: String,
    pub(crate) expires_in: Option<u64>,
    pub(crate) refresh_token: Option<String>,
}

/// A cached access token.
pub(crate) struct Cached {
    pub(crate) token: String,
    /// When it expires and how long it was issued for (`expires_in`).
    pub(crate) expires: Option<(Instant, Duration)>,
}

/// What the token mutex guards. `generation` counts the tokens fetched, so
/// that of many tasks that saw the same token refused only the first
/// fetches a new one.
pub(crate) struct TokenState {
    pub(crate) credentials: Credentials,
    pub(crate) cached: Option<Cached>,
    pub(crate) generation: u64,
}

impl TokenState {
    pub(crate) fn new(credentials: Credentials) -> Self {
        let cached = match &credentials {
            Credentials::ApiKey(t) | Credentials::AccessToken(t) => Some(Cached {
                token: t.clone(),
                expires: None,
            }),
            _ => None,
        };
        Self {
            credentials,
            cached,
            generation: 0,
        }
    }

    /// Whether a refused token can be replaced by fetching another.
    pub(crate) fn renewable(&self) -> bool {
        !matches!(
            self.credentials,
            Credentials::ApiKey(_) | Credentials::AccessToken(_)
        )
    }

    /// The cached token, unless it expires within `margin` — or within
    /// half its lifetime, for a token issued for less than twice the margin
    /// (so that short-lived tokens are not fetched anew for every request).
    pub(crate) fn fresh(&self, margin: Duration) -> Option<&str> {
        let c = self.cached.as_ref()?;
        match c.expires {
            Some((at, lifetime))
                if at.saturating_duration_since(Instant::now()) <= margin.min(lifetime / 2) =>
            {
                None
            }
            _ => Some(&c.token),
        }
    }

    /// The form of the next token request.
    pub(crate) fn grant_form(&self) -> Vec<(&'static str, String)> {
        match &self.credentials {
            Credentials::ClientCredentials {
                client_id,
                client_secret,
                scopes,
            } => {
                let mut f = vec![
                    ("grant_type", "client_credentials".to_owned()),
                    ("client_id", client_id.clone()),
                    ("client_secret", client_secret.clone()),
                ];
                if !scopes.is_empty() {
                    f.push(("scope", scopes.join(" ")));
                }
                f
            }
            Credentials::RefreshToken {
                client_id,
                client_secret,
                refresh_token,
            } => {
                let mut f = vec![
                    ("grant_type", "refresh_token".to_owned()),
                    ("refresh_token", refresh_token.clone()),
                    ("client_id", client_id.clone()),
                ];
                if let Some(s) = client_secret {
                    f.push(("client_secret", s.clone()));
                }
                f
            }
            Credentials::AuthorizationCode {
                client_id,
                client_secret,
                code,
                code_verifier,
                redirect_uri,
            } => {
                let mut f = vec![
                    ("grant_type", "authorization_code".to_owned()),
                    ("code", code.clone()),
                    ("redirect_uri", redirect_uri.clone()),
                    ("code_verifier", code_verifier.clone()),
                    ("client_id", client_id.clone()),
                ];
                if let Some(s) = client_secret {
                    f.push(("client_secret", s.clone()));
                }
                f
            }
            Credentials::ApiKey(_) | Credentials::AccessToken(_) => Vec::new(),
        }
    }

    /// Takes in a token response: caches the access token and, for the
    /// authorization-code family, moves to the rotated refresh token.
    /// Returns the new refresh token when there is one.
    pub(crate) fn accept(&mut self, t: TokenResponse) -> Option<String> {
        self.cached = Some(Cached {
            token: t.access_token,
            expires: t.expires_in.map(|s| {
                let lifetime = Duration::from_secs(s);
                (Instant::now() + lifetime, lifetime)
            }),
        });
        self.generation += 1;
        let rt = t.refresh_token?;
        let (client_id, client_secret) = match &self.credentials {
            Credentials::RefreshToken {
                client_id,
                client_secret,
                ..
            }
            | Credentials::AuthorizationCode {
                client_id,
                client_secret,
                ..
            } => (client_id.clone(), client_secret.clone()),
            _ => return None,
        };
        self.credentials = Credentials::RefreshToken {
            client_id,
            client_secret,
            refresh_token: rt.clone(),
        };
        Some(rt)
    }
}

/// The callback that receives every rotated refresh token.
pub(crate) type RefreshCallback = Arc<dyn Fn(&str) + Send + Sync>;

/// The first leg of the authorization-code flow with PKCE (RFC 7636,
/// `S256`): the URL to send the person to, and what to keep until the
/// redirect comes back.
///
/// ```
/// use gatehouse_client::AuthorizationRequest;
///
/// let req = AuthorizationRequest::new(
///     "https://localhost:8443",
///     "app_123",
///     "http://127.0.0.1:8765/callback",
///     ["users:read", "profile:read"],
/// )
/// .unwrap();
/// assert!(req.url.as_str().contains("code_challenge_method=S256"));
/// // Later, check the `state` of the redirect against `req.state`, and
/// // hand `req.code_verifier` to `Credentials::AuthorizationCode`.
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AuthorizationRequest {
    /// `{base}/oauth/authorize?…`
    pub url: Url,
    /// The random `state`; the redirect must carry the same.
    pub state: String,
    /// The PKCE verifier, for the code exchange.
    pub code_verifier: String,
    /// The redirect URI, for the code exchange.
    pub redirect_uri: String,
}

impl AuthorizationRequest {
    /// Builds the authorization URL for `client_id`.
    pub fn new<S: AsRef<str>>(
        base_url: &str,
        client_id: &str,
        redirect_uri: &str,
        scopes: impl IntoIterator<Item = S>,
    ) -> crate::Result<Self> {
        let mut url = Url::parse(base_url)
            .map_err(|e| crate::Error::Config(format!("base URL {base_url:?}: {e}")))?;
        url.set_path("/oauth/authorize");
        let code_verifier = random_token();
        let state = random_token();
        let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(sha2::Sha256::digest(code_verifier.as_bytes()));
        let scope: Vec<String> = scopes.into_iter().map(|s| s.as_ref().to_owned()).collect();
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("scope", &scope.join(" "))
            .append_pair("state", &state)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256");
        Ok(Self {
            url,
            state,
            code_verifier,
            redirect_uri: redirect_uri.to_owned(),
        })
    }

    /// The credentials that exchange `code` (from the redirect) and then
    /// keep refreshing.
    pub fn credentials(
        &self,
        client_id: &str,
        client_secret: Option<&str>,
        code: &str,
    ) -> Credentials {
        Credentials::AuthorizationCode {
            client_id: client_id.to_owned(),
            client_secret: client_secret.map(str::to_owned),
            code: code.to_owned(),
            code_verifier: self.code_verifier.clone(),
            redirect_uri: self.redirect_uri.clone(),
        }
    }
}

/// 256 random bits, base64url (43 characters, a valid PKCE verifier).
fn random_token() -> String {
    let mut bytes = [0u8; 32];
    bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_keeps_the_newest_refresh_token() {
        let mut s = TokenState::new(Credentials::refresh_token("app_1", None, "rt_1"));
        assert!(s.renewable());
        assert_eq!(s.fresh(Duration::ZERO), None);
        let rt = s.accept(TokenResponse {
            access_token: "at".into(),
            expires_in: Some(3600),
            refresh_token: Some("rt_2".into()),
        });
        assert_eq!(rt.as_deref(), Some("rt_2"));
        assert_eq!(s.fresh(Duration::from_secs(30)), Some("at"));
        assert_eq!(
            s.fresh(Duration::from_secs(4000)),
            Some("at"),
            "a margin above the lifetime: kept for half of it"
        );
        assert!(
            s.grant_form()
                .contains(&("refresh_token", "rt_2".to_owned()))
        );
        assert_eq!(s.generation, 1);
        // 10 s left of an hour: within a 30 s margin.
        s.cached.as_mut().unwrap().expires = Some((
            Instant::now() + Duration::from_secs(10),
            Duration::from_secs(3600),
        ));
        assert_eq!(s.fresh(Duration::from_secs(30)), None, "within the margin");
        assert_eq!(s.fresh(Duration::from_secs(5)), Some("at"));
    }

    #[test]
    fn pkce_challenge_is_s256_of_the_verifier() {
        let r =
            AuthorizationRequest::new("https://h", "app_1", "http://127.0.0.1/cb", ["a"]).unwrap();
        assert_eq!(r.code_verifier.len(), 43);
        let q: std::collections::HashMap<_, _> = r.url.query_pairs().into_owned().collect();
        let expect = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(sha2::Sha256::digest(r.code_verifier.as_bytes()));
        assert_eq!(q["code_challenge"], expect);
        assert_eq!(q["state"], r.state);
        assert_eq!(r.url.path(), "/oauth/authorize");
    }
}
