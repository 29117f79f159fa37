//! The typed operations of `/v1` (and the cursor lists of `/v2`), the
//! self-paging streams, and the table of operations.

use std::collections::{HashSet, VecDeque};

use std::pin::Pin;

use futures_util::Stream;
use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::client::{Body, Client};
use crate::error::{Error, Result};
use crate::models::{
    ApiKey, Application, ApplicationPatch, CreatedApiKey, NewApiKey, NewApplication, Organization,
    RegisteredApplication, RotatedSecret, UsageBucket,
};
use crate::models::{AuditCheckpoint, AuditEntry, AuditFilter, Event, EventFilter};
use crate::models::{
    ConsentedApplication, CursorPage, Identified, NewProduct, NewUser, Page, Product,
    ProductFilter, ProductPatch, ProfilePatch, Session, Single, User, UserFilter, UserPatch,
};
use crate::models::{MfaItem, SecurityPolicy, SecurityPolicyPatch};
use crate::models::{
    NewWebhookEndpoint, WebhookAttempt, WebhookEndpoint, WebhookEndpointPatch,
    WebhookEndpointWithSecret,
};

/// One operation of the OpenAPI document and the client method that
/// performs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Operation {
    /// The document's `operationId`.
    pub operation_id: &'static str,
    /// The HTTP method.
    pub method: &'static str,
    /// The path template.
    pub path: &'static str,
    /// The [`Client`] method(s).
    pub client_method: &'static str,
}

const fn op(
    operation_id: &'static str,
    method: &'static str,
    path: &'static str,
    client_method: &'static str,
) -> Operation {
    Operation {
        operation_id,
        method,
        path,
        client_method,
    }
}

/// Every `/v1` and `/v2` operation of the OpenAPI document and the client
/// method for it (a test compares this table with `docs/openapi.json`).
///
/// ```
/// let create = gatehouse_client::OPERATIONS
///     .iter()
///     .find(|o| o.operation_id == "createProduct")
///     .unwrap();
/// assert_eq!((create.method, create.path), ("POST", "/v1/products"));
/// ```
pub const OPERATIONS: &[Operation] = &[
    op("getProfile", "GET", "/v1/me", "get_profile"),
    op("updateProfile", "PATCH", "/v1/me", "update_profile"),
    op(
        "listMyApplications",
        "GET",
        "/v1/me/applications",
        "list_my_applications, list_my_applications_page",
    ),
    op(
        "forgetMyApplication",
        "DELETE",
        "/v1/me/applications/{app_id}",
        "forget_my_application",
    ),
    op(
        "listMySessions",
        "GET",
        "/v1/me/sessions",
        "list_my_sessions, list_my_sessions_page",
    ),
    op(
        "endMySession",
        "DELETE",
        "/v1/me/sessions/{session_id}",
        "end_my_session",
    ),
    op(
        "revokeMyOtherSessions",
        "POST",
        "/v1/me/sessions/revoke-others",
        "revoke_my_other_sessions",
    ),
    op("listMyMfa", "GET", "/v1/me/mfa", "list_my_mfa"),
    op(
        "listUserMfa",
        "GET",
        "/v1/users/{user_id}/mfa",
        "list_user_mfa",
    ),
    op(
        "resetUserMfa",
        "DELETE",
        "/v1/users/{user_id}/mfa",
        "reset_user_mfa",
    ),
    op(
        "getSecurityPolicy",
        "GET",
        "/v1/organization/security",
        "get_security_policy",
    ),
    op(
        "updateSecurityPolicy",
        "PATCH",
        "/v1/organization/security",
        "update_security_policy",
    ),
    op("openapi", "GET", "/v1/openapi.json", "openapi"),
    op(
        "listApplications",
        "GET",
        "/v1/applications",
        "list_applications, list_applications_page",
    ),
    op(
        "createApplication",
        "POST",
        "/v1/applications",
        "create_application",
    ),
    op(
        "getApplication",
        "GET",
        "/v1/applications/{app_id}",
        "get_application",
    ),
    op(
        "updateApplication",
        "PATCH",
        "/v1/applications/{app_id}",
        "update_application",
    ),
    op(
        "deleteApplication",
        "DELETE",
        "/v1/applications/{app_id}",
        "delete_application",
    ),
    op(
        "rotateApplicationSecret",
        "POST",
        "/v1/applications/{app_id}/secret",
        "rotate_application_secret",
    ),
    op(
        "getApplicationUsage",
        "GET",
        "/v1/applications/{app_id}/usage",
        "application_usage",
    ),
    op(
        "listApiKeys",
        "GET",
        "/v1/api-keys",
        "list_api_keys, list_api_keys_page",
    ),
    op("createApiKey", "POST", "/v1/api-keys", "create_api_key"),
    op("getApiKey", "GET", "/v1/api-keys/{key_id}", "get_api_key"),
    op(
        "revokeApiKey",
        "DELETE",
        "/v1/api-keys/{key_id}",
        "revoke_api_key",
    ),
    op(
        "getApiKeyUsage",
        "GET",
        "/v1/api-keys/{key_id}/usage",
        "api_key_usage",
    ),
    op(
        "listEvents",
        "GET",
        "/v1/events",
        "list_events_page, events_after, events_after_page",
    ),
    op("getEvent", "GET", "/v1/events/{event_id}", "get_event"),
    op(
        "listAuditLogs",
        "GET",
        "/v1/audit-logs",
        "list_audit_logs_page, audit_logs_after, audit_logs_after_page",
    ),
    op(
        "listAuditCheckpoints",
        "GET",
        "/v1/audit-logs/checkpoints",
        "list_audit_checkpoints_page",
    ),
    op(
        "exportAuditLogs",
        "GET",
        "/v1/audit-logs/export",
        "export_audit_logs",
    ),
    op(
        "listWebhookEndpoints",
        "GET",
        "/v1/webhook-endpoints",
        "list_webhook_endpoints, list_webhook_endpoints_page",
    ),
    op(
        "createWebhookEndpoint",
        "POST",
        "/v1/webhook-endpoints",
        "create_webhook_endpoint",
    ),
    op(
        "getWebhookEndpoint",
        "GET",
        "/v1/webhook-endpoints/{endpoint_id}",
        "get_webhook_endpoint",
    ),
    op(
        "updateWebhookEndpoint",
        "PATCH",
        "/v1/webhook-endpoints/{endpoint_id}",
        "update_webhook_endpoint",
    ),
    op(
        "deleteWebhookEndpoint",
        "DELETE",
        "/v1/webhook-endpoints/{endpoint_id}",
        "delete_webhook_endpoint",
    ),
    op(
        "rotateWebhookEndpointSecret",
        "POST",
        "/v1/webhook-endpoints/{endpoint_id}/secret",
        "rotate_webhook_endpoint_secret",
    ),
    op(
        "testWebhookEndpoint",
        "POST",
        "/v1/webhook-endpoints/{endpoint_id}/test",
        "test_webhook_endpoint",
    ),
    op(
        "replayWebhookEndpoint",
        "POST",
        "/v1/webhook-endpoints/{endpoint_id}/replay",
        "replay_webhook_endpoint",
    ),
    op(
        "redeliverEvent",
        "POST",
        "/v1/events/{event_id}/redeliver",
        "redeliver_event",
    ),
    op(
        "listWebhookAttempts",
        "GET",
        "/v1/webhook-endpoints/{endpoint_id}/attempts",
        "list_webhook_attempts",
    ),
    op(
        "getOrganization",
        "GET",
        "/v1/organization",
        "get_organization",
    ),
    op(
        "listProducts",
        "GET",
        "/v1/products",
        "list_products, list_products_page",
    ),
    op("createProduct", "POST", "/v1/products", "create_product"),
    op(
        "getProduct",
        "GET",
        "/v1/products/{product_id}",
        "get_product",
    ),
    op(
        "updateProduct",
        "PATCH",
        "/v1/products/{product_id}",
        "update_product",
    ),
    op(
        "deleteProduct",
        "DELETE",
        "/v1/products/{product_id}",
        "delete_product",
    ),
    op(
        "listUsers",
        "GET",
        "/v1/users",
        "list_users, list_users_page",
    ),
    op("createUser", "POST", "/v1/users", "create_user"),
    op("getUser", "GET", "/v1/users/{user_id}", "get_user"),
    op("updateUser", "PATCH", "/v1/users/{user_id}", "update_user"),
    op("deleteUser", "DELETE", "/v1/users/{user_id}", "delete_user"),
    op(
        "resendInvitation",
        "POST",
        "/v1/users/{user_id}/invitation",
        "resend_invitation",
    ),
    op(
        "listUserSessions",
        "GET",
        "/v1/users/{user_id}/sessions",
        "list_user_sessions, list_user_sessions_page",
    ),
    op(
        "endUserSessions",
        "DELETE",
        "/v1/users/{user_id}/sessions",
        "end_user_sessions",
    ),
    op(
        "endUserSession",
        "DELETE",
        "/v1/users/{user_id}/sessions/{session_id}",
        "end_user_session",
    ),
    op(
        "listUsersV2",
        "GET",
        "/v2/users",
        "list_users_v2, list_users_v2_page",
    ),
    op(
        "listProductsV2",
        "GET",
        "/v2/products",
        "list_products_v2, list_products_v2_page",
    ),
    op(
        "listEventsV2",
        "GET",
        "/v2/events",
        "list_events_v2, list_events_v2_page",
    ),
];

/// The stream a list operation returns: every record, the pages fetched as
/// it is polled; an error ends it.
pub type ListStream<T> = Pin<Box<dyn Stream<Item = Result<T>> + Send + 'static>>;

/// A usage request's `from`/`to`.
fn range(from: Option<&str>, to: Option<&str>) -> Vec<(&'static str, String)> {
    [("from", from), ("to", to)]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v.to_owned())))
        .collect()
}

fn json_body<T: Serialize>(body: &T) -> Result<Body> {
    serde_json::to_vec(body)
        .map(Body::Json)
        .map_err(|e| Error::Config(format!("encoding the request body: {e}")))
}

impl Client {
    async fn single<T: DeserializeOwned>(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Body,
    ) -> Result<T> {
        let url = self.url(segments, query);
        let answer = self.api(method, url, body).await?;
        Ok(answer.json::<Single<T>>()?.data)
    }

    async fn no_content(&self, segments: &[&str], query: &[(&str, String)]) -> Result<()> {
        let url = self.url(segments, query);
        self.api(Method::DELETE, url, Body::Empty).await?;
        Ok(())
    }

    // ---- profile (D15) ----

    /// `GET /v1/me` (`profile:read`): the user the token acts for. A token
    /// that acts for no user (client credentials, API key) gets
    /// `RESOURCE_NOT_FOUND`.
    ///
    /// ```no_run
    /// # async fn f(client: gatehouse_client::Client) -> gatehouse_client::Result<()> {
    /// let me = client.get_profile().await?;
    /// println!("signed in as {} <{}>", me.name, me.email);
    /// # Ok(()) }
    /// ```
    pub async fn get_profile(&self) -> Result<User> {
        self.single(Method::GET, &["v1", "me"], &[], Body::Empty)
            .await
    }

    /// `PATCH /v1/me` (`profile:write`): changes the caller's own name.
    pub async fn update_profile(&self, patch: &ProfilePatch) -> Result<User> {
        self.single(Method::PATCH, &["v1", "me"], &[], json_body(patch)?)
            .await
    }

    /// `GET /v1/me/applications` (`profile:read`), one page at `offset`:
    /// the applications the caller allowed to act for them.
    pub async fn list_my_applications_page(
        &self,
        limit: Option<u32>,
        offset: u64,
    ) -> Result<Page<ConsentedApplication>> {
        self.offset_page(&["v1", "me", "applications"], Vec::new(), limit, offset)
            .await
    }

    /// `GET /v1/me/applications` (`profile:read`) as a stream of every one.
    pub fn list_my_applications(&self) -> ListStream<ConsentedApplication> {
        offset_stream(
            self.clone(),
            &["v1", "me", "applications"],
            Vec::new(),
            None,
        )
    }

    /// `DELETE /v1/me/applications/{id}` (`profile:write`): forgets the
    /// consent and signs the application out (its refresh and access
    /// tokens of the caller stop working).
    pub async fn forget_my_application(&self, id: &str) -> Result<()> {
        self.no_content(&["v1", "me", "applications", id], &[])
            .await
    }

    // ---- sessions (D57) ----

    /// `GET /v1/me/sessions` (`profile:read`), one page at `offset`: the
    /// caller's browser sessions, newest first; [`Session::current`] marks
    /// the one the calling token's refresh chain began in. A token that
    /// acts for no user gets `RESOURCE_NOT_FOUND`.
    pub async fn list_my_sessions_page(
        &self,
        limit: Option<u32>,
        offset: u64,
    ) -> Result<Page<Session>> {
        self.offset_page(&["v1", "me", "sessions"], Vec::new(), limit, offset)
            .await
    }

    /// `GET /v1/me/sessions` (`profile:read`) as a stream of every one.
    ///
    /// ```no_run
    /// use futures_util::TryStreamExt;
    ///
    /// # async fn f(client: gatehouse_client::Client) -> gatehouse_client::Result<()> {
    /// let mut sessions = client.list_my_sessions();
    /// while let Some(s) = sessions.try_next().await? {
    ///     let here = if s.is_current() { " (this one)" } else { "" };
    ///     println!("{} since {} from {:?}{here}", s.id, s.created_at, s.ip);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn list_my_sessions(&self) -> ListStream<Session> {
        offset_stream(self.clone(), &["v1", "me", "sessions"], Vec::new(), None)
    }

    /// `DELETE /v1/me/sessions/{id}` (`profile:write`): ends one of the
    /// caller's sessions — its browser sign-in, and the refresh and access
    /// tokens of the applications signed in through it (the caller's own
    /// included, when it is the current one). Another person's or an
    /// unknown session is `RESOURCE_NOT_FOUND`.
    pub async fn end_my_session(&self, id: &str) -> Result<()> {
        self.no_content(&["v1", "me", "sessions", id], &[]).await
    }

    /// `POST /v1/me/sessions/revoke-others` (`profile:write`): ends every
    /// session of the caller but the one the calling token acts in; how
    /// many ended.
    pub async fn revoke_my_other_sessions(&self) -> Result<u64> {
        #[derive(serde::Deserialize)]
        struct Revoked {
            revoked: u64,
        }
        let r: Revoked = self
            .single(
                Method::POST,
                &["v1", "me", "sessions", "revoke-others"],
                &[],
                Body::Empty,
            )
            .await?;
        Ok(r.revoked)
    }

    /// `GET /v1/openapi.json`: the OpenAPI document (needs no token).
    pub async fn openapi(&self) -> Result<serde_json::Value> {
        self.public(self.url(&["v1", "openapi.json"], &[]))
            .await?
            .json()
    }

    // ---- the management API (D46) ----

    /// `GET /v1/applications` (`applications:read`), one page at `offset`.
    pub async fn list_applications_page(
        &self,
        limit: Option<u32>,
        offset: u64,
    ) -> Result<Page<Application>> {
        self.offset_page(&["v1", "applications"], Vec::new(), limit, offset)
            .await
    }

    /// `GET /v1/applications` (`applications:read`) as a stream of every
    /// application the caller manages (an editor: its own).
    pub fn list_applications(&self) -> ListStream<Application> {
        offset_stream(self.clone(), &["v1", "applications"], Vec::new(), None)
    }

    /// `POST /v1/applications` (`applications:write`): registers an
    /// application; a confidential one's secret is in the answer only.
    ///
    /// ```no_run
    /// use gatehouse_client::NewApplication;
    ///
    /// # async fn f(client: gatehouse_client::Client) -> gatehouse_client::Result<()> {
    /// let app = client
    ///     .create_application(&NewApplication::confidential("Billing", &["products:read"]))
    ///     .await?;
    /// let secret = app.client_secret.expect("a confidential application has one");
    /// # let _ = secret; Ok(()) }
    /// ```
    pub async fn create_application(&self, app: &NewApplication) -> Result<RegisteredApplication> {
        self.single(Method::POST, &["v1", "applications"], &[], json_body(app)?)
            .await
    }

    /// `GET /v1/applications/{id}` (`applications:read`).
    pub async fn get_application(&self, id: &str) -> Result<Application> {
        self.single(Method::GET, &["v1", "applications", id], &[], Body::Empty)
            .await
    }

    /// `PATCH /v1/applications/{id}` (`applications:write`); redirect URIs
    /// and scopes need every scope the application is registered for.
    pub async fn update_application(
        &self,
        id: &str,
        patch: &ApplicationPatch,
    ) -> Result<Application> {
        self.single(
            Method::PATCH,
            &["v1", "applications", id],
            &[],
            json_body(patch)?,
        )
        .await
    }

    /// `DELETE /v1/applications/{id}` (`applications:write`): every token,
    /// refresh token, code and session it holds stops working at once.
    pub async fn delete_application(&self, id: &str) -> Result<()> {
        self.no_content(&["v1", "applications", id], &[]).await
    }

    /// `POST /v1/applications/{id}/secret` (`applications:write`): a new
    /// secret; the previous one works for `grace_seconds` more (at most 7
    /// days; `None`: it stops now).
    pub async fn rotate_application_secret(
        &self,
        id: &str,
        grace_seconds: Option<u64>,
    ) -> Result<RotatedSecret> {
        let body = match grace_seconds {
            Some(g) => json_body(&serde_json::json!({ "grace_seconds": g }))?,
            None => Body::Empty,
        };
        self.single(
            Method::POST,
            &["v1", "applications", id, "secret"],
            &[],
            body,
        )
        .await
    }

    /// `GET /v1/applications/{id}/usage` (`applications:read`): requests and
    /// 429s per minute in [`from`, `to`) (RFC 3339; default the last hour).
    pub async fn application_usage(
        &self,
        id: &str,
        from: Option<&str>,
        to: Option<&str>,
    ) -> Result<Vec<UsageBucket>> {
        self.single(
            Method::GET,
            &["v1", "applications", id, "usage"],
            &range(from, to),
            Body::Empty,
        )
        .await
    }

    /// `GET /v1/api-keys` (`applications:read`), one page at `offset`.
    pub async fn list_api_keys_page(
        &self,
        limit: Option<u32>,
        offset: u64,
    ) -> Result<Page<ApiKey>> {
        self.offset_page(&["v1", "api-keys"], Vec::new(), limit, offset)
            .await
    }

    /// `GET /v1/api-keys` (`applications:read`) as a stream of every key the
    /// caller manages (revoked ones too).
    pub fn list_api_keys(&self) -> ListStream<ApiKey> {
        offset_stream(self.clone(), &["v1", "api-keys"], Vec::new(), None)
    }

    /// `POST /v1/api-keys` (`applications:write`): the key is in the answer only.
    pub async fn create_api_key(&self, key: &NewApiKey) -> Result<CreatedApiKey> {
        self.single(Method::POST, &["v1", "api-keys"], &[], json_body(key)?)
            .await
    }

    /// `GET /v1/api-keys/{id}` (`applications:read`).
    pub async fn get_api_key(&self, id: &str) -> Result<ApiKey> {
        self.single(Method::GET, &["v1", "api-keys", id], &[], Body::Empty)
            .await
    }

    /// `DELETE /v1/api-keys/{id}` (`applications:write`): revokes the key.
    pub async fn revoke_api_key(&self, id: &str) -> Result<()> {
        self.no_content(&["v1", "api-keys", id], &[]).await
    }

    /// `GET /v1/api-keys/{id}/usage` (`applications:read`).
    pub async fn api_key_usage(
        &self,
        id: &str,
        from: Option<&str>,
        to: Option<&str>,
    ) -> Result<Vec<UsageBucket>> {
        self.single(
            Method::GET,
            &["v1", "api-keys", id, "usage"],
            &range(from, to),
            Body::Empty,
        )
        .await
    }

    // ---- second factors (D56) ----

    /// `GET /v1/me/mfa` (`profile:read`): the caller's factors, then (last)
    /// the recovery codes left, when any were made.
    pub async fn list_my_mfa(&self) -> Result<Vec<MfaItem>> {
        self.single(Method::GET, &["v1", "me", "mfa"], &[], Body::Empty)
            .await
    }

    /// `GET /v1/users/{id}/mfa` (`users:write`): a person's factors as they
    /// see them.
    pub async fn list_user_mfa(&self, user_id: &str) -> Result<Vec<MfaItem>> {
        self.single(
            Method::GET,
            &["v1", "users", user_id, "mfa"],
            &[],
            Body::Empty,
        )
        .await
    }

    /// `DELETE /v1/users/{id}/mfa` (`users:write`): removes every factor
    /// and recovery code of a person, ends their sessions and revokes their
    /// tokens; done also when there was nothing to remove.
    pub async fn reset_user_mfa(&self, user_id: &str) -> Result<()> {
        self.no_content(&["v1", "users", user_id, "mfa"], &[]).await
    }

    /// `GET /v1/organization/security` (any token): the second-factor policy.
    pub async fn get_security_policy(&self) -> Result<SecurityPolicy> {
        self.single(
            Method::GET,
            &["v1", "organization", "security"],
            &[],
            Body::Empty,
        )
        .await
    }

    /// `PATCH /v1/organization/security` (`users:write` on a person's
    /// token, `admin` on an organization-wide credential).
    pub async fn update_security_policy(
        &self,
        patch: &SecurityPolicyPatch,
    ) -> Result<SecurityPolicy> {
        self.single(
            Method::PATCH,
            &["v1", "organization", "security"],
            &[],
            json_body(patch)?,
        )
        .await
    }

    /// `GET /v1/organization` (any token): the plan and rate limits.
    pub async fn get_organization(&self) -> Result<Organization> {
        self.single(Method::GET, &["v1", "organization"], &[], Body::Empty)
            .await
    }

    // ---- webhook endpoints (D55) ----

    /// `GET /v1/webhook-endpoints` (`webhooks:read`), one page at `offset`,
    /// newest first.
    pub async fn list_webhook_endpoints_page(
        &self,
        limit: Option<u32>,
        offset: u64,
    ) -> Result<Page<WebhookEndpoint>> {
        self.offset_page(&["v1", "webhook-endpoints"], Vec::new(), limit, offset)
            .await
    }

    /// `GET /v1/webhook-endpoints` (`webhooks:read`) as a stream of every
    /// endpoint.
    pub fn list_webhook_endpoints(&self) -> ListStream<WebhookEndpoint> {
        offset_stream(self.clone(), &["v1", "webhook-endpoints"], Vec::new(), None)
    }

    /// `POST /v1/webhook-endpoints` (`webhooks:write`): the secret is in
    /// the answer only.
    pub async fn create_webhook_endpoint(
        &self,
        endpoint: &NewWebhookEndpoint,
    ) -> Result<WebhookEndpointWithSecret> {
        self.single(
            Method::POST,
            &["v1", "webhook-endpoints"],
            &[],
            json_body(endpoint)?,
        )
        .await
    }

    /// `GET /v1/webhook-endpoints/{id}` (`webhooks:read`).
    pub async fn get_webhook_endpoint(&self, id: &str) -> Result<WebhookEndpoint> {
        self.single(
            Method::GET,
            &["v1", "webhook-endpoints", id],
            &[],
            Body::Empty,
        )
        .await
    }

    /// `PATCH /v1/webhook-endpoints/{id}` (`webhooks:write`).
    pub async fn update_webhook_endpoint(
        &self,
        id: &str,
        patch: &WebhookEndpointPatch,
    ) -> Result<WebhookEndpoint> {
        self.single(
            Method::PATCH,
            &["v1", "webhook-endpoints", id],
            &[],
            json_body(patch)?,
        )
        .await
    }

    /// `DELETE /v1/webhook-endpoints/{id}` (`webhooks:write`).
    pub async fn delete_webhook_endpoint(&self, id: &str) -> Result<()> {
        self.no_content(&["v1", "webhook-endpoints", id], &[]).await
    }

    /// `POST /v1/webhook-endpoints/{id}/secret` (`webhooks:write`): a new
    /// secret, in the answer only; the previous one keeps signing for
    /// `grace_seconds` (default 86,400).
    pub async fn rotate_webhook_endpoint_secret(
        &self,
        id: &str,
        grace_seconds: Option<u32>,
    ) -> Result<WebhookEndpointWithSecret> {
        let body = match grace_seconds {
            Some(g) => json_body(&serde_json::json!({ "grace_seconds": g }))?,
            None => Body::Empty,
        };
        self.single(
            Method::POST,
            &["v1", "webhook-endpoints", id, "secret"],
            &[],
            body,
        )
        .await
    }

    /// `GET /v1/webhook-endpoints/{id}/attempts` (`webhooks:read`), one
    /// page at `offset`, newest first; `status` narrows to `pending`,
    /// `succeeded` or `failed`.
    pub async fn list_webhook_attempts(
        &self,
        endpoint: &str,
        status: Option<&str>,
        limit: Option<u32>,
        offset: u64,
    ) -> Result<Page<WebhookAttempt>> {
        let query = status
            .map(|s| vec![("status", s.to_owned())])
            .unwrap_or_default();
        self.offset_page(
            &["v1", "webhook-endpoints", endpoint, "attempts"],
            query,
            limit,
            offset,
        )
        .await
    }

    /// `POST /v1/webhook-endpoints/{id}/test` (`webhooks:write`): sends a
    /// `webhook_endpoint.test` event now; the attempt, once made.
    pub async fn test_webhook_endpoint(&self, id: &str) -> Result<WebhookAttempt> {
        self.single(
            Method::POST,
            &["v1", "webhook-endpoints", id, "test"],
            &[],
            Body::Empty,
        )
        .await
    }

    /// `POST /v1/webhook-endpoints/{id}/replay` (`webhooks:write`): queues
    /// each event created in [`since`, `until`) the endpoint wants (with
    /// `only_failed`, those whose latest attempt failed or that have none);
    /// how many were queued.
    pub async fn replay_webhook_endpoint(
        &self,
        id: &str,
        since: &str,
        until: Option<&str>,
        only_failed: bool,
    ) -> Result<u64> {
        #[derive(serde::Deserialize)]
        struct Queued {
            queued: u64,
        }
        let mut body = serde_json::json!({ "since": since, "only_failed": only_failed });
        if let Some(u) = until {
            body["until"] = u.into();
        }
        let q: Queued = self
            .single(
                Method::POST,
                &["v1", "webhook-endpoints", id, "replay"],
                &[],
                json_body(&body)?,
            )
            .await?;
        Ok(q.queued)
    }

    /// `POST /v1/events/{id}/redeliver` (`webhooks:write`): queues the
    /// event for `endpoint`; the queued attempt.
    pub async fn redeliver_event(&self, event: &str, endpoint: &str) -> Result<WebhookAttempt> {
        self.single(
            Method::POST,
            &["v1", "events", event, "redeliver"],
            &[],
            json_body(&serde_json::json!({ "endpoint": endpoint }))?,
        )
        .await
    }

    // ---- events (D54) ----

    /// `GET /v1/events` (`events:read`), one page at `offset`, newest first.
    pub async fn list_events_page(&self, filter: &EventFilter, offset: u64) -> Result<Page<Event>> {
        self.offset_page(&["v1", "events"], filter.pairs(), filter.limit, offset)
            .await
    }

    /// `GET /v1/events?after_sequence=N` (`events:read`): the page of events
    /// after sequence `after`, oldest first; `meta.total` counts every event
    /// after it.
    pub async fn events_after_page(&self, filter: &EventFilter, after: i64) -> Result<Page<Event>> {
        let mut query = filter.pairs();
        query.push(("after_sequence", after.to_string()));
        if let Some(l) = filter.limit {
            query.push(("limit", l.to_string()));
        }
        let url = self.url(&["v1", "events"], &query);
        self.api(Method::GET, url, Body::Empty).await?.json()
    }

    /// D54's catch-up as a stream: every event after sequence `after`,
    /// oldest first, each page asked for after the last sequence seen. It
    /// ends when a page comes back empty; a mirror keeps the last
    /// `sequence` it applied and calls again from it later.
    pub fn events_after(&self, filter: EventFilter, after: i64) -> ListStream<Event> {
        let state = (self.clone(), filter, after, VecDeque::<Event>::new(), false);
        Box::pin(futures_util::stream::unfold(
            state,
            |(client, filter, mut after, mut buffer, mut done)| async move {
                loop {
                    if let Some(e) = buffer.pop_front() {
                        after = e.sequence;
                        return Some((Ok(e), (client, filter, after, buffer, done)));
                    }
                    if done {
                        return None;
                    }
                    match client.events_after_page(&filter, after).await {
                        Ok(page) => {
                            done = page.data.is_empty();
                            buffer.extend(page.data);
                        }
                        Err(e) => return Some((Err(e), (client, filter, after, buffer, true))),
                    }
                }
            },
        ))
    }

    /// `GET /v1/events/{id}` (`events:read`).
    pub async fn get_event(&self, id: &str) -> Result<Event> {
        self.single(Method::GET, &["v1", "events", id], &[], Body::Empty)
            .await
    }

    // ---- audit log (D58) ----

    /// `GET /v1/audit-logs` (`audit:read`), one page at `offset`, newest
    /// first.
    pub async fn list_audit_logs_page(
        &self,
        filter: &AuditFilter,
        offset: u64,
    ) -> Result<Page<AuditEntry>> {
        self.offset_page(&["v1", "audit-logs"], filter.pairs(), filter.limit, offset)
            .await
    }

    /// `GET /v1/audit-logs?category=C&after_sequence=N` (`audit:read`): the
    /// page of chain `category`'s entries after sequence `after`, oldest
    /// first; `meta.total` counts every entry after it.
    pub async fn audit_logs_after_page(
        &self,
        category: &str,
        filter: &AuditFilter,
        after: u64,
    ) -> Result<Page<AuditEntry>> {
        let mut query = filter.pairs();
        query.retain(|(k, _)| *k != "category");
        query.push(("category", category.to_owned()));
        query.push(("after_sequence", after.to_string()));
        if let Some(l) = filter.limit {
            query.push(("limit", l.to_string()));
        }
        let url = self.url(&["v1", "audit-logs"], &query);
        self.api(Method::GET, url, Body::Empty).await?.json()
    }

    /// `GET /v1/audit-logs/checkpoints` (`audit:read`), one page at
    /// `offset`, newest first; `category` `admin` or `security` (both when
    /// `None`). Each checkpoint's `jws` verifies against
    /// `/.well-known/audit-keys.json`.
    pub async fn list_audit_checkpoints_page(
        &self,
        category: Option<&str>,
        limit: Option<u32>,
        offset: u64,
    ) -> Result<Page<AuditCheckpoint>> {
        let query: Vec<(&'static str, String)> = category
            .map(|c| ("category", c.to_owned()))
            .into_iter()
            .collect();
        self.offset_page(&["v1", "audit-logs", "checkpoints"], query, limit, offset)
            .await
    }

    /// `GET /v1/audit-logs/export` (`audit:read`): the whole export as the
    /// server streamed it, `format` `jsonl` or `csv`, between `from` and
    /// `to` (RFC 3339; the whole retention when `None`). In JSON lines each
    /// chain ends with its `{"end": …}` line; without them it is incomplete.
    pub async fn export_audit_logs(
        &self,
        format: &str,
        from: Option<&str>,
        to: Option<&str>,
    ) -> Result<Vec<u8>> {
        let mut query = vec![("format", format.to_owned())];
        if let Some(f) = from {
            query.push(("from", f.to_owned()));
        }
        if let Some(t) = to {
            query.push(("to", t.to_owned()));
        }
        let url = self.url(&["v1", "audit-logs", "export"], &query);
        Ok(self.api(Method::GET, url, Body::Empty).await?.body)
    }

    /// D58's catch-up as a stream: every entry of chain `category` after
    /// sequence `after`, oldest first, each page asked for after the last
    /// sequence seen. It ends when a page comes back empty; a copy of the
    /// log keeps the last `sequence` (and `hash`) it stored and calls again
    /// from it later.
    pub fn audit_logs_after(
        &self,
        category: impl Into<String>,
        filter: AuditFilter,
        after: u64,
    ) -> ListStream<AuditEntry> {
        let state = (
            self.clone(),
            category.into(),
            filter,
            after,
            VecDeque::<AuditEntry>::new(),
            false,
        );
        Box::pin(futures_util::stream::unfold(
            state,
            |(client, category, filter, mut after, mut buffer, mut done)| async move {
                loop {
                    if let Some(e) = buffer.pop_front() {
                        after = e.sequence;
                        return Some((Ok(e), (client, category, filter, after, buffer, done)));
                    }
                    if done {
                        return None;
                    }
                    match client
                        .audit_logs_after_page(&category, &filter, after)
                        .await
                    {
                        Ok(page) => {
                            done = page.data.is_empty();
                            buffer.extend(page.data);
                        }
                        Err(e) => {
                            return Some((Err(e), (client, category, filter, after, buffer, true)));
                        }
                    }
                }
            },
        ))
    }

    // ---- users ----

    /// `GET /v1/users` (`users:read`), one page at `offset`.
    pub async fn list_users_page(&self, filter: &UserFilter, offset: u64) -> Result<Page<User>> {
        self.offset_page(&["v1", "users"], filter.pairs(), filter.limit, offset)
            .await
    }

    /// `GET /v1/users` (`users:read`) as a stream of every matching user,
    /// paging by itself. Offset paging is de-duplicated by id, so users
    /// created while the stream runs (which shift the newest-first order)
    /// never make a user appear twice, and every user present at the start
    /// appears once.
    ///
    /// ```no_run
    /// use futures_util::TryStreamExt;
    /// use gatehouse_client::{Role, UserFilter};
    ///
    /// # async fn f(client: gatehouse_client::Client) -> gatehouse_client::Result<()> {
    /// let mut admins = client.list_users(UserFilter::new().role(Role::Admin).limit(100));
    /// while let Some(user) = admins.try_next().await? {
    ///     println!("{} {}", user.id, user.email);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn list_users(&self, filter: UserFilter) -> ListStream<User> {
        offset_stream(self.clone(), &["v1", "users"], filter.pairs(), filter.limit)
    }

    /// `GET /v1/users/{id}` (`users:read`).
    pub async fn get_user(&self, id: &str) -> Result<User> {
        self.single(Method::GET, &["v1", "users", id], &[], Body::Empty)
            .await
    }

    /// `POST /v1/users` (`users:write`): creates the user in
    /// `pending_invite` and sends the invitation (D11). Sent with an
    /// `Idempotency-Key`, so the retries never create twice.
    ///
    /// ```no_run
    /// use gatehouse_client::{NewUser, Role};
    ///
    /// # async fn f(client: gatehouse_client::Client) -> gatehouse_client::Result<()> {
    /// let user = client
    ///     .create_user(&NewUser::new("ada@example.com", "Ada Lovelace", Role::Editor))
    ///     .await?;
    /// assert_eq!(user.email, "ada@example.com");
    /// # Ok(()) }
    /// ```
    pub async fn create_user(&self, user: &NewUser) -> Result<User> {
        self.single(Method::POST, &["v1", "users"], &[], json_body(user)?)
            .await
    }

    /// `PATCH /v1/users/{id}` (`users:write`): only the fields set change.
    pub async fn update_user(&self, id: &str, patch: &UserPatch) -> Result<User> {
        self.single(Method::PATCH, &["v1", "users", id], &[], json_body(patch)?)
            .await
    }

    /// `DELETE /v1/users/{id}` (`users:write`); `transfer_to` names the
    /// user who takes over the deleted user's applications (D13).
    pub async fn delete_user(&self, id: &str, transfer_to: Option<&str>) -> Result<()> {
        let query: Vec<(&str, String)> = transfer_to
            .map(|t| ("transfer_to", t.to_owned()))
            .into_iter()
            .collect();
        self.no_content(&["v1", "users", id], &query).await
    }

    /// `POST /v1/users/{id}/invitation` (`users:write`): sends a new
    /// invitation to a `pending_invite` user (D19).
    pub async fn resend_invitation(&self, id: &str) -> Result<User> {
        self.single(
            Method::POST,
            &["v1", "users", id, "invitation"],
            &[],
            Body::Empty,
        )
        .await
    }

    /// `GET /v1/users/{id}/sessions` (`users:write`), one page at
    /// `offset`: the person's browser sessions, newest first.
    pub async fn list_user_sessions_page(
        &self,
        user: &str,
        limit: Option<u32>,
        offset: u64,
    ) -> Result<Page<Session>> {
        self.offset_page(
            &["v1", "users", user, "sessions"],
            Vec::new(),
            limit,
            offset,
        )
        .await
    }

    /// `GET /v1/users/{id}/sessions` (`users:write`) as a stream of every
    /// session of the person.
    pub fn list_user_sessions(&self, user: &str) -> ListStream<Session> {
        offset_stream(
            self.clone(),
            &["v1", "users", user, "sessions"],
            Vec::new(),
            None,
        )
    }

    /// `DELETE /v1/users/{id}/sessions` (`users:write`): ends every session
    /// of the person (their tokens from those sign-ins stop working); also
    /// succeeds when there was none.
    pub async fn end_user_sessions(&self, user: &str) -> Result<()> {
        self.no_content(&["v1", "users", user, "sessions"], &[])
            .await
    }

    /// `DELETE /v1/users/{id}/sessions/{session}` (`users:write`): ends one
    /// session of the person; a session that is not theirs is
    /// `RESOURCE_NOT_FOUND`.
    pub async fn end_user_session(&self, user: &str, session: &str) -> Result<()> {
        self.no_content(&["v1", "users", user, "sessions", session], &[])
            .await
    }

    // ---- products (D16) ----

    /// `GET /v1/products` (`products:read`), one page at `offset`.
    pub async fn list_products_page(
        &self,
        filter: &ProductFilter,
        offset: u64,
    ) -> Result<Page<Product>> {
        self.offset_page(&["v1", "products"], filter.pairs(), filter.limit, offset)
            .await
    }

    /// `GET /v1/products` (`products:read`) as a stream that pages by
    /// itself, de-duplicated by id like [`Client::list_users`].
    pub fn list_products(&self, filter: ProductFilter) -> ListStream<Product> {
        offset_stream(
            self.clone(),
            &["v1", "products"],
            filter.pairs(),
            filter.limit,
        )
    }

    /// `GET /v1/products/{id}` (`products:read`).
    pub async fn get_product(&self, id: &str) -> Result<Product> {
        self.single(Method::GET, &["v1", "products", id], &[], Body::Empty)
            .await
    }

    /// `POST /v1/products` (`products:write`), with an `Idempotency-Key`
    /// kept across the retries of the call.
    ///
    /// ```no_run
    /// use gatehouse_client::{Error, ErrorCode, NewProduct};
    ///
    /// # async fn f(client: gatehouse_client::Client) -> gatehouse_client::Result<()> {
    /// match client.create_product(&NewProduct::new("Blue Shirt", "SHIRT-BLUE-M", 2500, 10)).await {
    ///     Ok(p) => println!("created {}", p.id),
    ///     Err(Error::Api { code: ErrorCode::DuplicateResource, .. }) => println!("SKU taken"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn create_product(&self, product: &NewProduct) -> Result<Product> {
        self.single(Method::POST, &["v1", "products"], &[], json_body(product)?)
            .await
    }

    /// `PATCH /v1/products/{id}` (`products:write`).
    pub async fn update_product(&self, id: &str, patch: &ProductPatch) -> Result<Product> {
        self.single(
            Method::PATCH,
            &["v1", "products", id],
            &[],
            json_body(patch)?,
        )
        .await
    }

    /// `DELETE /v1/products/{id}` (`products:write`).
    pub async fn delete_product(&self, id: &str) -> Result<()> {
        self.no_content(&["v1", "products", id], &[]).await
    }

    // ---- v2 previews (D32) ----

    /// `GET /v2/users` (preview; `users:read`), one page after the cursor.
    pub async fn list_users_v2_page(
        &self,
        filter: &UserFilter,
        starting_after: Option<&str>,
    ) -> Result<CursorPage<User>> {
        self.cursor_page(
            &["v2", "users"],
            filter.pairs(),
            filter.limit,
            starting_after,
        )
        .await
    }

    /// `GET /v2/users` (preview) as a stream following `next_cursor`.
    pub fn list_users_v2(&self, filter: UserFilter) -> ListStream<User> {
        cursor_stream(self.clone(), &["v2", "users"], filter.pairs(), filter.limit)
    }

    /// `GET /v2/products` (preview; `products:read`), one page after the cursor.
    pub async fn list_products_v2_page(
        &self,
        filter: &ProductFilter,
        starting_after: Option<&str>,
    ) -> Result<CursorPage<Product>> {
        self.cursor_page(
            &["v2", "products"],
            filter.pairs(),
            filter.limit,
            starting_after,
        )
        .await
    }

    /// `GET /v2/products` (preview) as a stream following `next_cursor`.
    pub fn list_products_v2(&self, filter: ProductFilter) -> ListStream<Product> {
        cursor_stream(
            self.clone(),
            &["v2", "products"],
            filter.pairs(),
            filter.limit,
        )
    }

    /// `GET /v2/events` (preview; `events:read`), newest first, one page
    /// after the cursor (D32 continued).
    pub async fn list_events_v2_page(
        &self,
        filter: &EventFilter,
        starting_after: Option<&str>,
    ) -> Result<CursorPage<Event>> {
        self.cursor_page(
            &["v2", "events"],
            filter.pairs(),
            filter.limit,
            starting_after,
        )
        .await
    }

    /// `GET /v2/events` (preview) as a stream following `next_cursor`,
    /// newest first; to catch up oldest first, use [`Client::events_after`].
    pub fn list_events_v2(&self, filter: EventFilter) -> ListStream<Event> {
        cursor_stream(
            self.clone(),
            &["v2", "events"],
            filter.pairs(),
            filter.limit,
        )
    }

    async fn offset_page<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        mut query: Vec<(&'static str, String)>,
        limit: Option<u32>,
        offset: u64,
    ) -> Result<Page<T>> {
        if let Some(l) = limit {
            query.push(("limit", l.to_string()));
        }
        query.push(("offset", offset.to_string()));
        let url = self.url(segments, &query);
        self.api(Method::GET, url, Body::Empty).await?.json()
    }

    async fn cursor_page<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        mut query: Vec<(&'static str, String)>,
        limit: Option<u32>,
        starting_after: Option<&str>,
    ) -> Result<CursorPage<T>> {
        if let Some(l) = limit {
            query.push(("limit", l.to_string()));
        }
        if let Some(c) = starting_after {
            query.push(("starting_after", c.to_owned()));
        }
        let url = self.url(segments, &query);
        self.api(Method::GET, url, Body::Empty).await?.json()
    }
}

struct OffsetState<T> {
    client: Client,
    segments: Vec<String>,
    query: Vec<(&'static str, String)>,
    limit: Option<u32>,
    offset: u64,
    seen: HashSet<String>,
    buffer: VecDeque<T>,
    done: bool,
}

fn offset_stream<T>(
    client: Client,
    segments: &[&str],
    query: Vec<(&'static str, String)>,
    limit: Option<u32>,
) -> ListStream<T>
where
    T: DeserializeOwned + Identified + Send + 'static,
{
    let state = OffsetState {
        client,
        segments: segments.iter().map(|s| (*s).to_owned()).collect(),
        query,
        limit,
        offset: 0,
        seen: HashSet::new(),
        buffer: VecDeque::new(),
        done: false,
    };
    Box::pin(futures_util::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(item) = s.buffer.pop_front() {
                return Some((Ok(item), s));
            }
            if s.done {
                return None;
            }
            let segments: Vec<&str> = s.segments.iter().map(String::as_str).collect();
            let page: Page<T> = match s
                .client
                .offset_page(&segments, s.query.clone(), s.limit, s.offset)
                .await
            {
                Ok(p) => p,
                Err(e) => {
                    s.done = true;
                    return Some((Err(e), s));
                }
            };
            let n = page.data.len() as u64;
            s.offset += n;
            // A short page is the last; records added meanwhile only push
            // older ones to higher offsets, where the next pages find them.
            if n == 0 || n < u64::from(page.meta.limit) || s.offset >= page.meta.total {
                s.done = true;
            }
            for item in page.data {
                if s.seen.insert(item.id().to_owned()) {
                    s.buffer.push_back(item);
                }
            }
        }
    }))
}

struct CursorState<T> {
    client: Client,
    segments: &'static [&'static str],
    query: Vec<(&'static str, String)>,
    limit: Option<u32>,
    cursor: Option<String>,
    buffer: VecDeque<T>,
    done: bool,
}

fn cursor_stream<T>(
    client: Client,
    segments: &'static [&'static str],
    query: Vec<(&'static str, String)>,
    limit: Option<u32>,
) -> ListStream<T>
where
    T: DeserializeOwned + Send + 'static,
{
    let state = CursorState {
        client,
        segments,
        query,
        limit,
        cursor: None,
        buffer: VecDeque::new(),
        done: false,
    };
    Box::pin(futures_util::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(item) = s.buffer.pop_front() {
                return Some((Ok(item), s));
            }
            if s.done {
                return None;
            }
            let page: CursorPage<T> = match s
                .client
                .cursor_page(s.segments, s.query.clone(), s.limit, s.cursor.as_deref())
                .await
            {
                Ok(p) => p,
                Err(e) => {
                    s.done = true;
                    return Some((Err(e), s));
                }
            };
            s.cursor = page.meta.next_cursor;
            s.done = s.cursor.is_none() || page.data.is_empty();
            s.buffer.extend(page.data);
        }
    }))
}
