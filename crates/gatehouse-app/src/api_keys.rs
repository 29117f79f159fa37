//! API keys (D27).

use gatehouse_auth::secrets;
use gatehouse_domain::{ApiKey, ApiKeyId, Name, OrgId, ScopeSet, Timestamp};

use crate::App;
use crate::Resource;
use crate::error::{AppError, AppResult, OrApp};

impl App {
    /// A new key, returned with its record; the key is shown only now.
    /// `staging`: D33's `gk_test_…` keys.
    pub async fn create_api_key(
        &self,
        org: &OrgId,
        name: Name,
        scopes: ScopeSet,
        staging: bool,
    ) -> AppResult<(ApiKey, String)> {
        if scopes.is_empty() {
            return Err(AppError::invalid("scopes", "must name at least one scope"));
        }
        let key = secrets::new_api_key(staging);
        let record = ApiKey {
            id: ApiKeyId::generate(),
            org: org.clone(),
            name: name.into_string(),
            scopes,
            created_at: Timestamp::now(),
            revoked_at: None,
        };
        self.store()
            .insert_api_key(org, &record, &secrets::hash_secret(&key))
            .await
            .or_app(Resource::ApiKey)?;
        Ok((record, key))
    }

    /// The organization's API keys (revoked ones too), oldest first.
    pub async fn list_api_keys(&self, org: &OrgId) -> AppResult<Vec<ApiKey>> {
        self.existing_org(org).await?;
        self.store()
            .list_api_keys(org)
            .await
            .or_app(Resource::ApiKey)
    }

    /// An operator revokes a key by its id (the id establishes the organization).
    pub async fn revoke_api_key(&self, id: &ApiKeyId) -> AppResult<ApiKey> {
        let k = self
            .store()
            .operator_find_api_key(id)
            .await
            .or_app(Resource::ApiKey)?
            .ok_or(AppError::NotFound(Resource::ApiKey))?;
        self.store()
            .revoke_api_key(&k.org, id, Timestamp::now())
            .await
            .or_app(Resource::ApiKey)
    }
}
