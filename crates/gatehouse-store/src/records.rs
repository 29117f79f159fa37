//! Records of the authorization server's state (part 2 of the storage
//! contract): revocations, the e-mail outbox, single-use links, sessions,
//! authorization codes and refresh chains. Secrets appear here only as
//! SHA-256 digests.

use gatehouse_domain::{ChainId, ClientId, Jti, OrgId, ScopeSet, Timestamp, User, UserId};

pub use gatehouse_domain::auth_state::{Revocation, RevocationKind, Session, SharedWindow};
pub use gatehouse_domain::link::{NewLink, OutboundEmail};

/// A revocation to write; storage assigns its id. The constructors are the
/// rules of what each kind covers, so every backend writes the same record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRevocation {
    pub kind: RevocationKind,
    pub subject: String,
    pub cutoff: i64,
    pub expires_at: Timestamp,
    /// See [`Revocation::scopes`].
    pub scopes: Option<ScopeSet>,
}

impl NewRevocation {
    /// Every token of `user` issued up to `now` (D11, D13, D19, D29).
    pub fn user(user: &UserId, now: Timestamp) -> Self {
        Self {
            kind: RevocationKind::User,
            subject: user.as_str().to_owned(),
            cutoff: now.unix_seconds(),
            expires_at: gatehouse_domain::access_revocation_expiry(now),
            scopes: None,
        }
    }

    /// Every access token issued to `client` up to `now` (D46, D47), kept
    /// until the last of them has expired.
    pub fn client(client: &ClientId, now: Timestamp) -> Self {
        Self {
            kind: RevocationKind::Client,
            subject: client.as_str().to_owned(),
            cutoff: now.unix_seconds(),
            expires_at: gatehouse_domain::access_revocation_expiry(now),
            scopes: None,
        }
    }

    /// The access tokens issued to `client` up to `now` that carry one of
    /// `removed` (D46 revised: exactly what narrowing the application
    /// takes away); its other tokens keep working.
    pub fn client_scopes(client: &ClientId, removed: ScopeSet, now: Timestamp) -> Self {
        Self {
            scopes: Some(removed),
            ..Self::client(client, now)
        }
    }

    /// Every access token of a revoked chain (D24, D25), kept until the last
    /// of them has expired (`access_expiry`).
    pub fn chain(chain: &ChainId, now: Timestamp, access_expiry: Timestamp) -> Self {
        Self {
            kind: RevocationKind::Chain,
            subject: chain.as_str().to_owned(),
            cutoff: now.unix_seconds(),
            expires_at: access_expiry,
            scopes: None,
        }
    }

    /// A record of `kind` for `subject`: every token up to `cutoff` (unix
    /// seconds), kept until `expires_at`.
    pub fn new(
        kind: RevocationKind,
        subject: impl Into<String>,
        cutoff: i64,
        expires_at: Timestamp,
    ) -> Self {
        Self {
            kind,
            subject: subject.into(),
            cutoff,
            expires_at,
            scopes: None,
        }
    }

    /// D24: what a rotation writes for the access token issued with the
    /// used refresh token, from the token's stored `access_jti` (none for
    /// NULL; text no token id can be is a corrupt row).
    pub fn of_rotation(
        stored_jti: Option<&str>,
        now: Timestamp,
        access_expiry: Timestamp,
    ) -> crate::StoreResult<Option<Self>> {
        stored_jti
            .map(|t| {
                crate::decode::text(t, Jti::parse)
                    .map(|jti| Self::jti(&jti, now, access_expiry))
                    .map_err(|e| {
                        crate::StoreError::Internal(format!("refresh_tokens.access_jti {e}"))
                    })
            })
            .transpose()
    }

    /// One access token (D24: the one issued with a rotated refresh token).
    pub fn jti(jti: &Jti, now: Timestamp, access_expiry: Timestamp) -> Self {
        Self {
            kind: RevocationKind::Jti,
            subject: jti.as_str().to_owned(),
            cutoff: now.unix_seconds(),
            expires_at: access_expiry,
            scopes: None,
        }
    }

    /// The record as stored under `id`.
    pub fn stored(self, id: i64) -> Revocation {
        Revocation {
            id,
            kind: self.kind,
            subject: self.subject,
            cutoff: self.cutoff,
            expires_at: self.expires_at,
            scopes: self.scopes,
        }
    }
}

/// A queued e-mail claimed by a delivery worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxMessage {
    pub id: i64,
    pub email: OutboundEmail,
    pub attempts: u32,
    pub created_at: Timestamp,
}

/// Defined with its rule in the domain (`gatehouse_domain::link`).
pub use gatehouse_domain::link::LinkKind;

/// A link as stored, with its user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkRecord {
    pub kind: LinkKind,
    pub org: OrgId,
    pub user: User,
    pub expires_at: Timestamp,
    pub used_at: Option<Timestamp>,
}

/// An authorization code (D26).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthCode {
    pub digest: [u8; 32],
    pub org: OrgId,
    pub client: ClientId,
    pub user: UserId,
    pub redirect_uri: String,
    pub scopes: ScopeSet,
    pub code_challenge: String,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    pub used_at: Option<Timestamp>,
    /// The chain its exchange created (revoked if the code is used again).
    pub chain: Option<ChainId>,
    /// D49: the authorization request's `nonce`, echoed in the ID token.
    pub nonce: Option<String>,
    /// D49: when the person signed in (the session's start).
    pub auth_time: Option<Timestamp>,
    /// D49: the browser session the code was issued in.
    pub sid: Option<String>,
    /// D56: how the person signed in (`amr`, `acr`).
    pub authn: Option<gatehouse_domain::mfa::Authn>,
}

/// A refresh-token chain: everything descended from one authorization (D24).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefreshChain {
    pub id: ChainId,
    pub org: OrgId,
    pub client: ClientId,
    pub user: UserId,
    pub scopes: ScopeSet,
    pub created_at: Timestamp,
    /// The absolute end (D24: 90 days after the authorization).
    pub ends_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
    /// D49: when the person signed in; refreshed ID tokens keep it.
    pub auth_time: Option<Timestamp>,
    /// D49: the browser session the chain was begun in (ended by logout).
    pub sid: Option<String>,
    /// D56: how the person signed in; `None` for chains begun before D56.
    pub authn: Option<gatehouse_domain::mfa::Authn>,
}

/// A remembered consent (D49), a domain record: see
/// [`gatehouse_domain::Consent`].
pub use gatehouse_domain::Consent;

/// One refresh token of a chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefreshToken {
    pub digest: [u8; 32],
    pub chain: ChainId,
    pub issued_at: Timestamp,
    pub expires_at: Timestamp,
    pub used_at: Option<Timestamp>,
    /// The successor pair, sealed, kept for the grace window only (D24).
    pub successor_sealed: Option<Vec<u8>>,
    pub successor_until: Option<Timestamp>,
    /// The `jti` of the access token issued with this refresh token.
    pub access_jti: Option<Jti>,
}

/// The outcome of redeeming a code atomically.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Redeemed {
    /// First use: the chain and its first refresh token were written.
    Fresh,
    /// Used before: the chain the first use created (to revoke), if any.
    Reused(Option<ChainId>),
    /// D57: the browser session the code was issued in has ended (its row
    /// is gone): no chain may begin in it. Nothing was written.
    SessionEnded,
}

/// The outcome of rotating a refresh token atomically.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rotated {
    /// First use: the successor was written and this token marked used, and
    /// the revocation of the access token issued with it (D24) in the same
    /// transaction; `None` when the token has no recorded access `jti`.
    Fresh(Option<Revocation>),
    /// Already used: the stored state, for the grace window or reuse detection.
    AlreadyUsed(RefreshToken),
}
