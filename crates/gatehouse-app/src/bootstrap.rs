//! First start (D41) and the mock's data (D34).

use gatehouse_auth::{password, secrets};
use gatehouse_domain::{ClientId, Fixture, OrgId, Organization, Plan, ScopeSet, Timestamp};
use gatehouse_store::NewClient;

use crate::App;
use crate::Resource;
use crate::error::{AppResult, OrApp};

/// The organization and client to create on an empty database.
#[derive(Clone, Debug)]
pub struct Bootstrap {
    pub org_name: &'static str,
    pub client_id: ClientId,
    pub client_name: &'static str,
    pub client_secret: String,
    /// D33, D34: start with the fixture data.
    pub fixture: bool,
    /// The client's redirect URIs (D53: the mock's loopback one).
    pub redirect_uris: Vec<String>,
    /// D53, the mock only: the password every fixture user signs in with.
    pub fixture_password: Option<String>,
}

impl App {
    /// On an empty database, an organization (plan pro) and a client
    /// approved for every scope; the organization's id, or `None` when an
    /// organization already exists. The store checks and creates atomically,
    /// so nodes starting together bootstrap once.
    pub async fn bootstrap(&self, b: Bootstrap) -> AppResult<Option<OrgId>> {
        let org = Organization {
            id: OrgId::generate(),
            name: b.org_name.into(),
            plan: Plan::Pro,
            per_minute: None,
            per_second: None,
            created_at: Timestamp::now(),
        };
        let client = NewClient {
            id: b.client_id,
            name: b.client_name.into(),
            secret_hash: Some(secrets::hash_secret(&b.client_secret)),
            scopes: ScopeSet::all(),
            redirect_uris: b.redirect_uris,
            post_logout_redirect_uris: Vec::new(),
            admin_approved: true,
            owner: None,
            created_at: Timestamp::now(),
        };
        if !org_store(self)
            .bootstrap(&org, &client)
            .await
            .or_app(Resource::Organization)?
        {
            return Ok(None);
        }
        if b.fixture {
            let mut fixture = Fixture::standard();
            if let Some(pw) = b.fixture_password {
                // Argon2id once, off the runtime; every fixture user shares it.
                fixture = fixture.with_password_hash(password::hash(pw).await);
            }
            org_store(self)
                .reset_to_fixture(Some(&org.id), &fixture, Timestamp::now(), None)
                .await
                .or_app(Resource::Organization)?;
        }
        Ok(Some(org.id))
    }
}

/// This area's view of storage: the `OrgStore` trait only (issue 25).
fn org_store(app: &App) -> &dyn gatehouse_store::OrgStore {
    app.0.store.as_ref()
}
