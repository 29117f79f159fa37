//! The in-memory revocation set: "is this token's `jti`, chain or user
//! revoked?" answered on every request without a database query (D24, D25,
//! D11, D13, D29). It is kept in step with the `revocations` table: this
//! process applies its own revocations directly (so the next request sees
//! them), and [`RevocationSet::sync`] pulls rows written by other processes
//! (the CLI, other nodes) by increasing id.

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicI64, Ordering};

use gatehouse_domain::auth_state::{Revocation, RevocationKind};
use gatehouse_domain::{ScopeSet, Timestamp};

use crate::jwt::AccessClaims;

#[derive(Default)]
struct Sets {
    /// jti → expiry (ms).
    jtis: HashMap<String, i64>,
    /// chain id → expiry (ms).
    chains: HashMap<String, i64>,
    /// user id → (cut-off in Unix seconds, expiry ms): tokens issued at or before are dead.
    users: HashMap<String, (i64, i64)>,
    /// client id → (cut-off in Unix seconds, expiry ms): tokens issued to the
    /// client at or before are dead (D46, D47).
    clients: HashMap<String, (i64, i64)>,
    /// client id → (scopes, cut-off, expiry ms): tokens issued to the client
    /// at or before the cut-off that carry one of the scopes are dead (D46
    /// revised: a scope removed from the application).
    client_scopes: HashMap<String, Vec<(ScopeSet, i64, i64)>>,
}

impl Sets {
    fn is_empty(&self) -> bool {
        self.jtis.is_empty()
            && self.chains.is_empty()
            && self.users.is_empty()
            && self.clients.is_empty()
            && self.client_scopes.is_empty()
    }
}

#[derive(Default)]
pub struct RevocationSet {
    sets: RwLock<Sets>,
    last_id: AtomicI64,
}

impl RevocationSet {
    /// Whether the token is revoked.
    pub fn is_revoked(&self, c: &AccessClaims) -> bool {
        let s = self.sets.read().unwrap_or_else(|e| e.into_inner());
        if s.is_empty() {
            return false;
        }
        s.jtis.contains_key(c.jti.as_str())
            || c.chain
                .as_ref()
                .is_some_and(|ch| s.chains.contains_key(ch.as_str()))
            || c.user
                .as_ref()
                .and_then(|u| s.users.get(u.as_str()))
                .is_some_and(|(cutoff, _)| c.iat <= *cutoff)
            || s.clients
                .get(c.client_id.as_str())
                .is_some_and(|(cutoff, _)| c.iat <= *cutoff)
            || s.client_scopes
                .get(c.client_id.as_str())
                .is_some_and(|cuts| {
                    cuts.iter().any(|(scopes, cutoff, _)| {
                        c.iat <= *cutoff && !c.scopes.intersect(*scopes).is_empty()
                    })
                })
    }

    /// Applies revocations (from this process or from storage).
    pub fn apply(&self, revs: &[Revocation]) {
        if revs.is_empty() {
            return;
        }
        let mut s = self.sets.write().unwrap_or_else(|e| e.into_inner());
        for r in revs {
            let exp = r.expires_at.millis();
            match r.kind {
                RevocationKind::Jti => {
                    s.jtis.insert(r.subject.clone(), exp);
                }
                RevocationKind::Chain => {
                    s.chains.insert(r.subject.clone(), exp);
                }
                RevocationKind::User => {
                    let e = s.users.entry(r.subject.clone()).or_insert((r.cutoff, exp));
                    e.0 = e.0.max(r.cutoff);
                    e.1 = e.1.max(exp);
                }
                RevocationKind::Client if r.scopes.is_some() => {
                    let scopes = r.scopes.unwrap_or(ScopeSet::EMPTY);
                    let cuts = s.client_scopes.entry(r.subject.clone()).or_default();
                    // The same scopes cut again (another node's copy of one
                    // record, or a later narrowing) keep one entry.
                    match cuts.iter_mut().find(|(s, _, _)| *s == scopes) {
                        Some(e) => {
                            e.1 = e.1.max(r.cutoff);
                            e.2 = e.2.max(exp);
                        }
                        None => cuts.push((scopes, r.cutoff, exp)),
                    }
                }
                RevocationKind::Client => {
                    let e = s
                        .clients
                        .entry(r.subject.clone())
                        .or_insert((r.cutoff, exp));
                    e.0 = e.0.max(r.cutoff);
                    e.1 = e.1.max(exp);
                }
            }
        }
    }

    /// The id of the newest revocation absorbed: the application layer
    /// reads storage's revocations above it.
    pub fn last_seen(&self) -> i64 {
        self.last_id.load(Ordering::SeqCst)
    }

    /// Takes in revocations read from storage since [`Self::last_seen`],
    /// and forgets expired ones.
    pub fn absorb(&self, revs: &[Revocation], now: Timestamp) -> usize {
        if let Some(last) = revs.last() {
            self.last_id.fetch_max(last.id, Ordering::SeqCst);
        }
        self.apply(revs);
        let mut s = self.sets.write().unwrap_or_else(|e| e.into_inner());
        let now = now.millis();
        s.jtis.retain(|_, exp| *exp > now);
        s.chains.retain(|_, exp| *exp > now);
        s.users.retain(|_, (_, exp)| *exp > now);
        s.clients.retain(|_, (_, exp)| *exp > now);
        s.client_scopes.retain(|_, cuts| {
            cuts.retain(|(_, _, exp)| *exp > now);
            !cuts.is_empty()
        });
        revs.len()
    }

    /// Entries held (for metrics and tests).
    pub fn len(&self) -> usize {
        let s = self.sets.read().unwrap_or_else(|e| e.into_inner());
        s.jtis.len()
            + s.chains.len()
            + s.users.len()
            + s.clients.len()
            + s.client_scopes.values().map(Vec::len).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatehouse_domain::{ChainId, ClientId, Jti, OrgId, UserId};

    fn claims(user: Option<UserId>, iat: i64, chain: Option<&str>) -> AccessClaims {
        AccessClaims {
            auth_time: None,
            authn: None,
            org: OrgId::generate(),
            client_id: ClientId::generate(),
            user,
            scopes: ScopeSet::EMPTY,
            jti: Jti::parse("j1").unwrap(),
            iat,
            exp: iat + 3600,
            chain: chain.map(|c| ChainId::parse(c).unwrap()),
        }
    }

    fn rev(kind: RevocationKind, subject: &str, cutoff: i64) -> Revocation {
        Revocation {
            id: 1,
            kind,
            subject: subject.into(),
            cutoff,
            expires_at: Timestamp::now().plus_seconds(100),
            scopes: None,
        }
    }

    #[test]
    fn d46_revised_a_scope_cut_revokes_only_the_tokens_that_carry_a_removed_scope() {
        let set = RevocationSet::default();
        let mut carrying = claims(None, 1000, None);
        carrying.scopes = ScopeSet::parse("users:read users:write").unwrap();
        let mut other = carrying.clone();
        other.scopes = ScopeSet::parse("users:read").unwrap();
        set.apply(&[Revocation {
            scopes: Some(ScopeSet::parse("users:write admin").unwrap()),
            ..rev(RevocationKind::Client, carrying.client_id.as_str(), 1000)
        }]);
        assert!(set.is_revoked(&carrying));
        assert!(!set.is_revoked(&other), "carries no removed scope");
        carrying.iat = 1001;
        assert!(!set.is_revoked(&carrying), "issued after the cut-off");
        let mut elsewhere = claims(None, 10, None);
        elsewhere.scopes = ScopeSet::parse("users:write").unwrap();
        assert!(!set.is_revoked(&elsewhere), "another client");
    }

    #[test]
    fn user_cutoff_revokes_older_tokens_only() {
        let set = RevocationSet::default();
        let u = UserId::generate();
        set.apply(&[rev(RevocationKind::User, u.as_str(), 1000)]);
        assert!(set.is_revoked(&claims(Some(u.clone()), 999, None)));
        assert!(set.is_revoked(&claims(Some(u.clone()), 1000, None)));
        assert!(!set.is_revoked(&claims(Some(u), 1001, None)));
        assert!(!set.is_revoked(&claims(Some(UserId::generate()), 10, None)));
    }

    #[test]
    fn client_cutoff_revokes_the_clients_older_tokens_only() {
        let set = RevocationSet::default();
        let mut old = claims(None, 1000, None);
        set.apply(&[rev(RevocationKind::Client, old.client_id.as_str(), 1000)]);
        assert!(set.is_revoked(&old));
        old.iat = 1001;
        assert!(!set.is_revoked(&old), "issued after the cut-off");
        assert!(!set.is_revoked(&claims(None, 10, None)), "another client");
    }

    #[test]
    fn jti_and_chain_revocations() {
        let set = RevocationSet::default();
        assert!(!set.is_revoked(&claims(None, 5, Some("c1"))));
        set.apply(&[rev(RevocationKind::Chain, "c1", 0)]);
        assert!(set.is_revoked(&claims(None, 5, Some("c1"))));
        assert!(!set.is_revoked(&claims(None, 5, Some("c2"))));
        set.apply(&[rev(RevocationKind::Jti, "j1", 0)]);
        assert!(set.is_revoked(&claims(None, 5, None)));
    }
}
