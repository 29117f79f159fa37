//! The store conformance suite: behaviour every backend must show. A backend
//! runs it with [`store_conformance_tests!`](crate::store_conformance_tests),
//! giving an async expression that yields a fresh, empty, migrated store.
//! One module per aggregate, like the traits; the helpers below are shared.

mod api_keys;
mod clients;
mod decoding;
mod events;
mod grants;
mod idempotency;
mod introspection;
mod jobs;
mod links;
mod mfa;
mod orgs;
mod outbox;
mod products;
mod rate;
mod revocations;
mod scoping;
mod sealed;
mod search;
mod sessions;
mod signing_keys;
mod users;
mod webhooks;

pub use api_keys::*;
pub use clients::*;
pub use decoding::*;
pub use events::*;
pub use grants::*;
pub use idempotency::*;
pub use introspection::*;
pub use jobs::*;
pub use links::*;
pub use mfa::*;
pub use orgs::*;
pub use outbox::*;
pub use products::*;
pub use rate::*;
pub use revocations::*;
pub use scoping::*;
pub use sealed::*;
pub use search::*;
pub use sessions::*;
pub use signing_keys::*;
pub use users::*;
pub use webhooks::*;

use gatehouse_domain::{
    ApiKey, ApiKeyId, ChainId, ClientId, DomainError, Email, Jti, Name, NewProduct, NewUser, OrgId,
    Organization, Page, Plan, ProductPatch, ProductStatus, Role, Scope, ScopeSet, Sku, Timestamp,
    UserId, UserPatch, UserStatus,
};

use crate::records::*;
use crate::{
    ChainFilter, ClientChanges, NewClient, ProductFilter, SigningKeyRecord, Store, StoreError,
    UserFilter,
};

/// Generates one `#[tokio::test]` per conformance check for a backend.
#[macro_export]
macro_rules! store_conformance_tests {
    ($make:expr) => {
        $crate::store_conformance_tests!(@each $make;
            organizations, bootstrap_runs_once, users_roundtrip_and_isolation,
            duplicate_email_is_per_org_and_case_insensitive, user_list_order_filters_and_paging,
            user_update_rules, last_admin_rule,
            concurrent_demotions_keep_an_admin, concurrent_link_uses_succeed_once,
            delete_with_owned_clients, products_roundtrip_and_rules,
            clients_and_admin_approval, api_keys, signing_keys,
            invitations_and_outbox, password_resets, reset_password_returns_the_user_as_updated, revocations_follow_user_changes,
            outbox_claims_and_retries, sessions_and_login_failures, codes_redeem_once, one_time_values_are_spent_once, oidc_sessions_chains_and_consents,
            refresh_rotation_is_atomic, refresh_rotation_revokes_the_replaced_access_token, client_secret_rotation, purge_removes_only_expired, cursor_pages_are_stable_under_inserts, v2_preview_flag,
            staging_reset_restores_the_fixture, shared_rate_windows, jobs_are_claimed_once,
            clients_version_moves_with_every_client_change, corrupt_rows_are_internal_errors,
            corrupt_token_ids_are_internal_errors, every_tenant_method_is_scoped,
            idempotency_claims_and_keeps, concurrent_idempotent_claims_win_once,
            stale_idempotent_claims_are_taken_over, expired_idempotency_keys_are_purged,
            idempotency_keys_are_scoped,
            refresh_token_lookup_is_read_only, fixture_users_get_the_fixture_password,
            client_update_narrows_and_revokes, client_delete_removes_everything_it_holds, owner_suspensions_follow_deactivation_moves_and_rotation, operator_listings,
            d46_keys_usage_and_owner_cuts, search_changes_cover_every_write,
            leases_never_exceed_the_window,
            events_are_written_with_their_change_and_sequenced, event_sequences_are_per_organization,
            concurrent_writers_get_one_gap_free_sequence, events_are_purged_after_the_retention,
            user_creation_and_invitations_are_told, user_changes_tell_their_cascades_first,
            applications_and_keys_tell_their_changes, consents_and_reuse_are_told,
            corrupt_events_are_internal_errors,
            webhook_endpoints_roundtrip_rotate_and_limit,
            concurrent_endpoint_creations_stop_at_the_limit,
            removed_owners_disable_their_endpoints,
            deliveries_fan_out_lease_and_finish,
            a_backlogged_endpoint_does_not_starve_another,
            sessions_are_listed_touched_and_paged, ending_sessions_revokes_their_chains_and_tells,
            expired_sign_ins_stay_while_their_chains_live, user_changes_end_sessions_as_d57_says,
            a_refresh_is_a_use_of_its_session, no_chain_begins_in_an_ended_session,
            totp_factors_are_replaced_and_replay_safe,
            recovery_codes_are_spent_once_and_reset_removes_all,
            second_step_failures_and_policy_deadlines,
            passkeys_are_stored_resolved_and_counted_once,
            sealed_values_are_paged_and_resealed_over_what_was_read,
            one_master_key_rotation_is_under_way_at_most,
            key_holders_say_what_they_hold_and_old_ones_go,
            organization_changes_are_written_with_their_event);
    };
    (@each $make:expr; $($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let store = $make;
                $crate::conformance::$name(&store).await;
            }
        )*
    };
}

/// Test-only access to a backend's own database, for the checks that need
/// a row no [`Store`] method would write (strict decoding: a corrupt row
/// must read as `StoreError::Internal`, never as a default value). Each
/// backend implements it for its tests only.
#[async_trait::async_trait]
pub trait PlantRows: Store {
    /// Runs `sql` (plain SQL both backends accept) as is, with the schema's
    /// CHECK constraints out of the way, so it can plant a value the schema
    /// would refuse. Panics when it fails.
    async fn plant(&self, sql: &str);
}

pub(crate) fn org(name: &str) -> Organization {
    Organization {
        id: OrgId::generate(),
        name: name.into(),
        plan: Plan::Free,
        per_minute: None,
        per_second: None,
        created_at: Timestamp::now(),
    }
}

pub(crate) async fn new_org(s: &dyn Store) -> OrgId {
    let o = org("Acme");
    s.create_org(&o).await.unwrap();
    o.id
}

pub(crate) fn user(email: &str, role: Role, status: UserStatus, at: i64) -> NewUser {
    NewUser {
        id: UserId::generate(),
        email: Email::parse(email).unwrap(),
        name: Name::parse(&email.replace('@', " at ")).unwrap(),
        role,
        status,
        password_hash: (status == UserStatus::Active).then(|| "$argon2id$test".to_owned()),
        created_at: Timestamp::from_millis(at),
    }
}

pub(crate) fn client(owner: Option<UserId>) -> NewClient {
    NewClient {
        id: ClientId::generate(),
        name: "app".into(),
        secret_hash: Some([7; 32]),
        scopes: ScopeSet::parse("users:read products:read").unwrap(),
        redirect_uris: vec!["https://app.example.com/cb".into()],
        admin_approved: false,
        owner,
        created_at: Timestamp::now(),
        post_logout_redirect_uris: vec![],
    }
}

pub(crate) fn product(name: &str, sku: &str, stock: i64) -> NewProduct {
    NewProduct {
        name: Name::parse(name).unwrap(),
        sku: Sku::parse(sku).unwrap(),
        price: 1999,
        stock,
        discontinued: false,
    }
}

/// What a corrupt-row read must give: `Internal`, naming the table, the
/// column and the row.
pub(crate) fn assert_corrupt<T: std::fmt::Debug>(
    got: Result<T, StoreError>,
    table: &str,
    column: &str,
    row: &str,
) {
    match got {
        Err(StoreError::Internal(m)) => {
            for part in [table, column, row] {
                assert!(m.contains(part), "{m:?} should name {part:?}");
            }
        }
        other => panic!("a corrupt {table}.{column} read as {other:?}"),
    }
}

pub(crate) fn link(byte: u8, expires_at: Timestamp, to: &str) -> NewLink {
    NewLink {
        digest: [byte; 32],
        expires_at,
        email: OutboundEmail {
            to: to.into(),
            subject: "Hello".into(),
            body: format!("link {byte}"),
        },
    }
}

/// A chain id of a test, which must have the shape of a real one.
/// A session of `user` in `org` begun at `created`, its browser sign-in
/// ending at `expires`.
pub(crate) fn session(
    org: &OrgId,
    user: &UserId,
    created: Timestamp,
    expires: Timestamp,
) -> Session {
    Session {
        id: gatehouse_domain::SessionId::generate(),
        org: org.clone(),
        user: user.clone(),
        created_at: created,
        last_seen_at: created,
        expires_at: expires,
        ip: Some("192.0.2.10".into()),
        user_agent: Some("Conformance/1.0".into()),
        amr: vec!["pwd".into()],
        auth_time: created,
        applications: Vec::new(),
    }
}

pub(crate) fn cid(id: &str) -> ChainId {
    ChainId::parse(id).expect("a chain id")
}

pub(crate) fn chain_for(
    o: &OrgId,
    client: &ClientId,
    u: &UserId,
    now: Timestamp,
    id: &str,
) -> RefreshChain {
    RefreshChain {
        authn: None,
        id: cid(id),
        org: o.clone(),
        client: client.clone(),
        user: u.clone(),
        scopes: ScopeSet::parse("users:read").unwrap(),
        created_at: now,
        ends_at: now.plus_seconds(90 * 86400),
        revoked_at: None,
        auth_time: None,
        sid: None,
    }
}

/// An unused authorization code `[byte; 32]` of `user` for `client`, for
/// `users:read`, made at `now` and good for five minutes.
pub(crate) fn auth_code(
    byte: u8,
    org: &OrgId,
    client: &ClientId,
    user: &UserId,
    now: Timestamp,
) -> AuthCode {
    AuthCode {
        authn: None,
        digest: [byte; 32],
        org: org.clone(),
        client: client.clone(),
        user: user.clone(),
        redirect_uri: "https://app.example.com/cb".into(),
        scopes: ScopeSet::parse("users:read").unwrap(),
        code_challenge: "abc".into(),
        created_at: now,
        expires_at: now.plus_seconds(300),
        used_at: None,
        chain: None,
        auth_time: None,
        nonce: None,
        sid: None,
    }
}

pub(crate) fn rt(byte: u8, chain: &str, now: Timestamp) -> RefreshToken {
    RefreshToken {
        digest: [byte; 32],
        chain: cid(chain),
        issued_at: now,
        expires_at: now.plus_seconds(30 * 86400),
        used_at: None,
        successor_sealed: None,
        successor_until: None,
        access_jti: Some(Jti::parse(&format!("jti{byte}")).unwrap()),
    }
}

pub(crate) async fn futures_join8(s: &dyn Store, key: &str) -> Vec<bool> {
    let now = Timestamp::now();
    let (a, b, c, d) = tokio::join!(
        s.claim_job("concurrent", key, now),
        s.claim_job("concurrent", key, now),
        s.claim_job("concurrent", key, now),
        s.claim_job("concurrent", key, now),
    );
    vec![a.unwrap(), b.unwrap(), c.unwrap(), d.unwrap()]
}

/// A publisher for tests of storage: shows a resource as its domain type
/// serializes (the server's published shapes are the server's to test).
pub struct TestPublish;

impl gatehouse_domain::event::Publish for TestPublish {
    fn factor(&self, user: &UserId, f: &gatehouse_domain::mfa::Factor) -> String {
        serde_json::json!({
            "id": f.id.as_str(),
            "type": f.kind.as_str(),
            "user_id": user.as_str(),
        })
        .to_string()
    }
    fn security(&self, p: &gatehouse_domain::mfa::SecurityPolicy) -> String {
        serde_json::json!({
            "mfa": p.mfa.as_str(),
            "enrollment_grace_days": p.enrollment_grace_days,
        })
        .to_string()
    }
    fn session(&self, s: &gatehouse_domain::session::Session) -> String {
        serde_json::json!({
            "id": s.id.as_str(),
            "user_id": s.user.as_str(),
            "applications": s.applications.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
        })
        .to_string()
    }
    fn product(&self, p: &gatehouse_domain::Product) -> String {
        serde_json::to_string(p).expect("a product serializes")
    }
    fn user(&self, u: &gatehouse_domain::User) -> String {
        serde_json::to_string(u).expect("a user serializes")
    }
    fn application(&self, c: &gatehouse_domain::Client) -> String {
        serde_json::json!({
            "id": c.id.as_str(),
            "name": c.name,
            "owner_id": c.owner.as_ref().map(|o| o.as_str()),
            "scopes": c.scopes.bits(),
            "suspended_reason": c.suspended_reason().map(|r| r.as_str()),
        })
        .to_string()
    }
    fn api_key(&self, k: &gatehouse_domain::ApiKey) -> String {
        serde_json::json!({
            "id": k.id.as_str(),
            "owner_id": k.owner.as_ref().map(|o| o.as_str()),
            "scopes": k.scopes.bits(),
            "revoked_at": k.revoked_at.map(|t| t.millis()),
        })
        .to_string()
    }
    fn organization(&self, o: &gatehouse_domain::Organization) -> String {
        serde_json::to_string(o).expect("an organization serializes")
    }
    fn consent(
        &self,
        user: &UserId,
        consent: &gatehouse_domain::Consent,
        client: &gatehouse_domain::Client,
    ) -> String {
        serde_json::json!({
            "id": client.id.as_str(),
            "scopes": consent.scopes.bits(),
            "user_id": user.as_str(),
        })
        .to_string()
    }
    fn event(&self, _: &OrgId, e: &gatehouse_domain::event::Event) -> String {
        serde_json::json!({"id": e.event.id.as_str(), "sequence": e.sequence}).to_string()
    }
    fn webhook_endpoint(&self, e: &gatehouse_domain::webhook::Endpoint) -> String {
        serde_json::json!({
            "id": e.id.as_str(),
            "description": e.description,
            "status": e.status(),
            "updated_at": e.updated_at.millis(),
        })
        .to_string()
    }
}

/// What the suite's changes tell their events: made by the system, shown
/// by [`TestPublish`].
pub fn teller() -> &'static gatehouse_domain::event::Teller {
    static TELLER: std::sync::OnceLock<gatehouse_domain::event::Teller> =
        std::sync::OnceLock::new();
    TELLER.get_or_init(|| {
        gatehouse_domain::event::Teller::new(
            gatehouse_domain::event::Origin::system(),
            std::sync::Arc::new(TestPublish),
        )
    })
}
