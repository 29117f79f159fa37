//! Client applications (D20, D22, D40).

use async_trait::async_trait;
use gatehouse_domain::event::Teller;
use gatehouse_domain::{Client, ClientId, OrgId, Scope, ScopeSet, Timestamp, UserId};

use crate::StoreResult;

/// A client application to register.
#[derive(Clone, Debug)]
pub struct NewClient {
    pub id: ClientId,
    pub name: String,
    pub secret_hash: Option<[u8; 32]>,
    pub scopes: ScopeSet,
    pub redirect_uris: Vec<String>,
    /// D49: where RP-initiated logout may send the person (matched exactly).
    pub post_logout_redirect_uris: Vec<String>,
    pub admin_approved: bool,
    pub owner: Option<UserId>,
    pub created_at: Timestamp,
}

/// What [`ClientStore::update_client`] changes; `None` keeps the field.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientChanges {
    pub name: Option<String>,
    pub redirect_uris: Option<Vec<String>>,
    pub post_logout_redirect_uris: Option<Vec<String>>,
    pub scopes: Option<ScopeSet>,
    /// D46 (revised): a new owner, an active user of the organization; the
    /// backend reads the current and the new owner in the transaction and
    /// applies `gatehouse_domain::client::move_owner`.
    pub owner: Option<UserId>,
}

impl ClientChanges {
    /// The client these changes make of `old`, and whether its scopes
    /// narrowed (then both backends revoke what carries a removed scope, in
    /// the same transaction). Listing `admin` never approves it (only
    /// `client approve-admin` does, D22/D46); removing it withdraws the
    /// approval. The one place both backends take this rule from.
    pub fn apply(&self, old: &Client) -> (Client, bool) {
        // The owner and the suspension a move leaves are the caller's
        // (`move_owner`, with the owners read in the same transaction).
        let scopes = self.scopes.unwrap_or(old.scopes);
        let mut new = old.clone();
        new.scopes = scopes;
        new.admin_approved = old.admin_approved && scopes.contains(Scope::Admin);
        if let Some(n) = &self.name {
            new.name = n.clone();
        }
        if let Some(u) = &self.redirect_uris {
            new.redirect_uris = u.clone();
        }
        if let Some(u) = &self.post_logout_redirect_uris {
            new.post_logout_redirect_uris = u.clone();
        }
        (new, !old.scopes.is_subset(scopes))
    }

    /// The scopes these changes take away from `old` (D46 revised: what is
    /// revoked), empty when none.
    pub fn removed_scopes(&self, old: &Client) -> ScopeSet {
        self.scopes.map_or(ScopeSet::EMPTY, |s| {
            ScopeSet::from_bits(old.scopes.bits() & !s.bits())
        })
    }
}

/// Client applications (D20, D22, D40).
///
/// [`ClientStore::resolve_client`] is the one unscoped method: a client
/// authenticating names only its `client_id`, which establishes the
/// organization. Every change takes the organization.
#[async_trait]
pub trait ClientStore: Send + Sync {
    async fn insert_client(
        &self,
        org: &OrgId,
        client: &NewClient,
        tell: &Teller,
    ) -> StoreResult<Client>;
    /// The tenant-resolving look-up: a client by its `client_id`, whatever its
    /// organization. Used only to authenticate a client.
    async fn resolve_client(&self, id: &ClientId) -> StoreResult<Option<Client>>;
    /// Every client application of `org`, oldest first (D47 `client list`).
    async fn list_clients(&self, org: &OrgId) -> StoreResult<Vec<Client>>;
    /// Changes a client (D46, D47), atomically. When `changes.scopes` leaves
    /// out a scope the client had, the same transaction also:
    /// - revokes every live refresh chain of the client whose scopes are not
    ///   within the new set (its refresh tokens stop working),
    /// - removes the dropped scopes from the consents people gave the client
    ///   (a consent left with no scope is forgotten),
    /// - clears `admin_approved` when `admin` is dropped (listing it again
    ///   needs the operator's approval again),
    /// - writes a `Client` revocation at `now` limited to the dropped scopes
    ///   ([`NewRevocation::client_scopes`](crate::NewRevocation::client_scopes)),
    ///   so exactly the access tokens issued to the client so far that carry
    ///   one die on every node (D46 revised).
    ///
    /// With `changes.owner`, the application moves to that user as
    /// `gatehouse_domain::client::move_owner` decides (D46 revised), the
    /// current and the new owner read in the same transaction.
    ///
    /// A new scope set never approves `admin`: `admin_approved` only goes
    /// from true to false here. `NotFound` for a client of another organization.
    async fn update_client(
        &self,
        org: &OrgId,
        id: &ClientId,
        changes: &ClientChanges,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<Client>;
    /// Deletes a client and everything it holds (D46, D47): its codes,
    /// refresh chains and tokens and remembered consents, and writes a
    /// `Client` revocation at `now` so its access tokens die on every node,
    /// atomically. `NotFound` for a client of another organization.
    async fn delete_client(
        &self,
        org: &OrgId,
        id: &ClientId,
        now: Timestamp,
        tell: &Teller,
    ) -> StoreResult<()>;
    /// Allows the `admin` scope for a client (D22), adding it to its scopes.
    async fn approve_admin(&self, org: &OrgId, id: &ClientId, tell: &Teller)
    -> StoreResult<Client>;
    /// D20 rotate-secret: a new secret digest; the old one keeps working until
    /// `previous_until` (none: at once). `gatehouse_domain::client::check_rotation`
    /// decides in the transaction (D46 revised: an owed rotation takes no
    /// grace, and is lifted by it).
    async fn rotate_client_secret(
        &self,
        org: &OrgId,
        id: &ClientId,
        secret_hash: &[u8; 32],
        previous_until: Option<Timestamp>,
        tell: &Teller,
    ) -> StoreResult<Client>;
    /// A number that changes after every committed change to any client
    /// application, by any process or node using this store, read without a
    /// storage round trip. The auth layer keeps client records in memory
    /// only while it is unchanged, so no change is ever missed (D40).
    /// `None` (the default) when the backend cannot offer one: callers then
    /// read the record every time.
    fn clients_version(&self) -> Option<u64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(scopes: &str, approved: bool) -> Client {
        Client {
            id: ClientId::generate(),
            org: OrgId::generate(),
            name: "old".into(),
            secret_hash: None,
            previous_secret: None,
            scopes: ScopeSet::parse(scopes).unwrap(),
            redirect_uris: vec!["https://a.example/cb".into()],
            post_logout_redirect_uris: vec![],
            admin_approved: approved,
            owner: None,
            created_at: Timestamp::now(),
            updated_at: Timestamp::now(),
            suspension: gatehouse_domain::client::Suspension::NONE,
        }
    }

    #[test]
    fn d46_changes_keep_what_they_do_not_name_and_never_approve_admin() {
        let old = client("users:read", false);
        let (new, narrowed) = ClientChanges {
            scopes: Some(ScopeSet::parse("users:read admin").unwrap()),
            ..Default::default()
        }
        .apply(&old);
        assert!(
            !narrowed && !new.admin_approved,
            "listing admin approves nothing"
        );
        assert_eq!(
            (new.name.as_str(), &new.redirect_uris),
            ("old", &old.redirect_uris)
        );

        let old = client("users:read admin", true);
        let (new, narrowed) = ClientChanges {
            name: Some("new".into()),
            scopes: Some(ScopeSet::parse("users:read").unwrap()),
            ..Default::default()
        }
        .apply(&old);
        assert!(narrowed, "a removed scope narrows");
        assert!(!new.admin_approved, "removing admin withdraws the approval");
        assert_eq!(new.name, "new");
        let (kept, narrowed) = ClientChanges::default().apply(&old);
        assert!(!narrowed && kept.admin_approved);
    }
}
