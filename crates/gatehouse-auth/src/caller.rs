//! Who is calling the API: an access token's claims or an API key (D27).

use std::sync::Arc;

use gatehouse_domain::{ApiKey, ClientId, OrgId, ScopeSet, UserId};

use crate::jwt::AccessClaims;

/// The prefix of live API keys (D3, D27); the prefix tells them apart from JWTs.
pub const API_KEY_PREFIX: &str = "gk_live_";
/// The prefix of staging API keys (D33).
pub const TEST_API_KEY_PREFIX: &str = "gk_test_";

/// The API-key prefix of an environment: staging keys never work in
/// production and the other way round (D33).
pub fn api_key_prefix(staging: bool) -> &'static str {
    if staging {
        TEST_API_KEY_PREFIX
    } else {
        API_KEY_PREFIX
    }
}

/// A verified credential.
#[derive(Clone, Debug)]
pub enum Caller {
    Token(Arc<AccessClaims>),
    ApiKey(Arc<ApiKey>),
}

/// The credential lineage that rate limits count against (D28): a
/// client-credentials client, a user's grant to a client, or an API key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Lineage {
    Client(ClientId),
    UserGrant(ClientId, UserId),
    ApiKey(gatehouse_domain::ApiKeyId),
    /// Other counted things (failed client authentications by client or address).
    Other(String),
}

impl Lineage {
    /// The lineage as text, the key of the shared windows (D28, D44).
    pub fn shared_key(&self) -> String {
        match self {
            Lineage::Client(c) => format!("client:{c}"),
            Lineage::UserGrant(c, u) => format!("grant:{c}:{u}"),
            Lineage::ApiKey(k) => format!("key:{k}"),
            Lineage::Other(o) => format!("other:{o}"),
        }
    }
}

impl Caller {
    pub fn org(&self) -> &OrgId {
        match self {
            Caller::Token(c) => &c.org,
            Caller::ApiKey(k) => &k.org,
        }
    }

    pub fn scopes(&self) -> ScopeSet {
        match self {
            Caller::Token(c) => c.scopes,
            Caller::ApiKey(k) => k.scopes,
        }
    }

    /// The refresh chain a user's token was issued in, or, for the
    /// dashboard's, the browser session it acts in (D57's `current`).
    pub fn chain(&self) -> Option<&gatehouse_domain::ChainId> {
        match self {
            Caller::Token(c) => c.chain.as_ref(),
            Caller::ApiKey(_) => None,
        }
    }

    /// The user the credential acts for (`None`: client credentials, API keys).
    pub fn user(&self) -> Option<&UserId> {
        match self {
            Caller::Token(c) => c.user.as_ref(),
            Caller::ApiKey(_) => None,
        }
    }

    /// Who the caller is as an event's `actor` (D54): a person through the
    /// client the token was issued to, an application, or an API key.
    pub fn actor(&self) -> gatehouse_domain::event::Actor {
        use gatehouse_domain::event::Actor;
        match self {
            Caller::Token(c) => match &c.user {
                Some(u) => Actor::User {
                    user: u.clone(),
                    client: Some(c.client_id.clone()),
                },
                None => Actor::Client(c.client_id.clone()),
            },
            Caller::ApiKey(k) => Actor::ApiKey(k.id.clone()),
        }
    }

    pub fn lineage(&self) -> Lineage {
        match self {
            Caller::Token(c) => match &c.user {
                Some(u) => Lineage::UserGrant(c.client_id.clone(), u.clone()),
                None => Lineage::Client(c.client_id.clone()),
            },
            Caller::ApiKey(k) => Lineage::ApiKey(k.id.clone()),
        }
    }
}
