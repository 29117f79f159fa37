//! API keys as the operator manages them (D27, D47); the management API's
//! are in [`crate::manage`].

use gatehouse_domain::event::Origin;
use gatehouse_domain::{ApiKey, ApiKeyId, Name, OrgId, ScopeSet, Timestamp};

use crate::manage::KeyRequest;

use crate::App;
use crate::Resource;
use crate::error::{AppError, AppResult, OrApp};

impl App {
    /// A new key made by the operator (D27, D47), returned with its
    /// record; the key is shown only now. `staging`: D33's `gk_test_…` keys.
    pub async fn create_api_key(
        &self,
        org: &OrgId,
        name: Name,
        scopes: ScopeSet,
        staging: bool,
    ) -> AppResult<(ApiKey, String)> {
        self.existing_org(org).await?;
        let req = KeyRequest {
            name,
            scopes,
            expires_at: None,
        };
        // D54: made by the operator, through the CLI.
        self.insert_key(org, req, None, staging, &Origin::operator())
            .await
    }

    /// The organization's API keys (revoked ones too), oldest first.
    pub async fn list_api_keys(&self, org: &OrgId) -> AppResult<Vec<ApiKey>> {
        self.existing_org(org).await?;
        api_key_store(self)
            .list_api_keys(org)
            .await
            .or_app(Resource::ApiKey)
    }

    /// An operator's look-up of a key by its id alone (`gatehouse apikey
    /// show`; the id establishes the organization). Never reachable over HTTP.
    pub async fn operator_api_key(&self, id: &ApiKeyId) -> AppResult<ApiKey> {
        api_key_store(self)
            .operator_find_api_key(id)
            .await
            .or_app(Resource::ApiKey)?
            .ok_or(AppError::NotFound(Resource::ApiKey))
    }

    /// An operator revokes a key by its id (the id establishes the organization).
    pub async fn revoke_api_key(&self, id: &ApiKeyId) -> AppResult<ApiKey> {
        let k = self.operator_api_key(id).await?;
        api_key_store(self)
            .revoke_api_key(
                &k.org,
                id,
                Timestamp::now(),
                &self.teller(&Origin::operator()),
            )
            .await
            .or_app(Resource::ApiKey)
    }
}

/// This area's view of storage: the `ApiKeyStore` trait only (issue 25).
fn api_key_store(app: &App) -> &dyn gatehouse_store::ApiKeyStore {
    app.0.store.as_ref()
}
