//! Bearer-token verification with a bounded cache: a token whose signature
//! was checked once is not checked again; its expiry is (and, from part 2 on,
//! the in-memory revocation set).

use std::sync::Arc;

use gatehouse_domain::Timestamp;
use quick_cache::sync::Cache;

use crate::jwt::{self, AccessClaims};
use crate::keys::KeyRing;
use crate::{Issuer, TokenError};

/// Verified tokens kept in memory (bounded; least recently used go first).
const CACHE_ENTRIES: usize = 100_000;

pub struct TokenVerifier {
    cache: Cache<Arc<str>, Arc<AccessClaims>>,
}

impl Default for TokenVerifier {
    fn default() -> Self {
        Self::new(CACHE_ENTRIES)
    }
}

impl TokenVerifier {
    pub fn new(entries: usize) -> Self {
        Self {
            cache: Cache::new(entries),
        }
    }

    pub fn verify(
        &self,
        keys: &KeyRing,
        issuer: &Issuer,
        token: &str,
    ) -> Result<Arc<AccessClaims>, TokenError> {
        let now = Timestamp::now().unix_seconds();
        if let Some(hit) = self.cache.get(token) {
            return if hit.exp <= now {
                Err(TokenError::Expired)
            } else {
                Ok(hit)
            };
        }
        let claims = Arc::new(jwt::verify(&keys.current(), issuer, token, now)?);
        self.cache.insert(Arc::from(token), claims.clone());
        Ok(claims)
    }
}
