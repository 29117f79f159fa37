//! The management API's use cases (D46): applications, API keys, usage and
//! the organization, as a caller with [`Manager`] rights sees them. The
//! rules of who may do what are the domain's ([`gatehouse_domain::manage`]);
//! the changes themselves are the same use cases the operator's CLI calls
//! ([`App::register_client`], [`App::update_client`], …), so the API and the
//! CLI are two doors to one set of rules (D46, D47).

use gatehouse_auth::Caller;
use gatehouse_auth::secrets;
use gatehouse_domain::event::Origin;
use gatehouse_domain::manage::{MAX_SECRET_GRACE_SECS, key_prefix};
use gatehouse_domain::{
    ApiKey, ApiKeyId, Client, ClientId, Listing, Manager, Name, OrgId, Organization, Page,
    ScopeSet, Timestamp, UsageRange, UserId,
};
use gatehouse_store::{Credential, UsageMinute};

use crate::App;
use crate::Resource;
use crate::clients::{ClientRegistration, ClientUpdate, Registered, RotatedSecret};
use crate::error::{AppError, AppResult, OrApp};

/// The two kinds of application (D20, D46's `type` filter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApplicationType {
    Confidential,
    Public,
}

impl ApplicationType {
    pub fn of(c: &Client) -> Self {
        if c.is_public() {
            Self::Public
        } else {
            Self::Confidential
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Confidential => "confidential",
            Self::Public => "public",
        }
    }
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "confidential" => Ok(Self::Confidential),
            "public" => Ok(Self::Public),
            _ => Err("must be one of: confidential, public".into()),
        }
    }
}

/// What `GET /v1/applications` keeps (D46, D46 revised and continued);
/// `None` keeps everything.
#[derive(Clone, Debug, Default)]
pub struct ApplicationFilter {
    pub kind: Option<ApplicationType>,
    pub suspended: Option<bool>,
    pub owner: Option<UserId>,
}

/// An API key to create (D46).
#[derive(Clone, Debug)]
pub struct KeyRequest {
    pub name: Name,
    pub scopes: ScopeSet,
    pub expires_at: Option<Timestamp>,
}

/// One minute of usage (D46), zero-filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UsageBucket {
    pub start: Timestamp,
    pub requests: u64,
    pub rejected: u64,
}

fn page_of<T: Clone>(items: &[T], page: Page) -> Listing<T> {
    let start = usize::try_from(page.offset)
        .unwrap_or(usize::MAX)
        .min(items.len());
    let end = start.saturating_add(page.limit as usize).min(items.len());
    Listing {
        items: items[start..end].to_vec(),
        total: items.len() as u64,
    }
}

impl App {
    /// The management rights of a verified credential (D46): a person's
    /// reach comes from their role as it is now, not as it was when the
    /// token was issued.
    ///
    /// D46 (revised): what a credential creates belongs to its owner: an
    /// API key's `owner_id`, or the `owner_id` of the application a
    /// client-credentials token was issued to.
    pub async fn manager(&self, caller: &Caller) -> AppResult<Manager> {
        match caller {
            Caller::Token(c) => match &c.user {
                Some(user) => {
                    let person = self.get_user(&c.org, user).await?;
                    Ok(Manager::person(c.scopes, person.id, person.role))
                }
                None => {
                    let app = self.client(&c.org, &c.client_id).await?;
                    Ok(Manager::credential(c.scopes, app.owner))
                }
            },
            Caller::ApiKey(k) => Ok(Manager::credential(k.scopes, k.owner.clone())),
        }
    }

    /// An application of `org` the caller reaches; any other is 404 (D46).
    pub async fn managed_application(
        &self,
        m: &Manager,
        org: &OrgId,
        id: &ClientId,
    ) -> AppResult<Client> {
        match self.client(org, id).await {
            Ok(c) if m.reaches(c.owner.as_ref()) => Ok(c),
            Ok(_) | Err(AppError::NotFound(_)) => Err(AppError::NotFound(Resource::Application)),
            Err(e) => Err(e),
        }
    }

    /// The applications the caller reaches, oldest first, one page.
    ///
    /// `suspended` keeps only the suspended applications (`true`) or only
    /// the others (`false`, D46 revised); `owner` only those that person
    /// owns (D46 continued: an editor, who reaches only its own, gets an
    /// empty page for anyone else).
    pub async fn list_applications(
        &self,
        m: &Manager,
        org: &OrgId,
        filter: ApplicationFilter,
        page: Page,
    ) -> AppResult<Listing<Client>> {
        let ApplicationFilter {
            kind,
            suspended,
            owner,
        } = filter;
        let all: Vec<Client> = client_store(self)
            .list_clients(org)
            .await
            .or_app(Resource::Application)?
            .into_iter()
            .filter(|c| m.reaches(c.owner.as_ref()))
            .filter(|c| kind.is_none_or(|k| ApplicationType::of(c) == k))
            .filter(|c| suspended.is_none_or(|s| c.suspended_reason().is_some() == s))
            .filter(|c| owner.is_none() || c.owner == owner)
            .collect();
        Ok(page_of(&all, page))
    }

    /// Registers an application for the caller (D46): no scope it does not
    /// hold; a person becomes its owner.
    pub async fn register_application(
        &self,
        m: &Manager,
        org: &OrgId,
        mut reg: ClientRegistration,
        origin: &Origin,
    ) -> AppResult<Registered> {
        m.may_grant(reg.scopes)?;
        reg.owner = m.owner().cloned();
        self.register_client(org, reg, origin).await
    }

    /// Changes an application (D46): the name and post-logout URIs need only
    /// `applications:write`; redirect URIs and scopes need every scope the
    /// application is registered for (and `admin` when approved), and a new
    /// scope set nothing the caller lacks. D46 (revised): only an admin or
    /// an organization-wide credential moves it to another owner, an active
    /// user of the organization (another organization's is 404).
    pub async fn update_application(
        &self,
        m: &Manager,
        org: &OrgId,
        id: &ClientId,
        update: ClientUpdate,
        origin: &Origin,
    ) -> AppResult<Client> {
        let app = self.managed_application(m, org, id).await?;
        if update.redirect_uris.is_some() || update.scopes.is_some() {
            m.may_reconfigure(&app)?;
        }
        if update.owner.is_some() {
            m.may_move()?;
        }
        if let Some(scopes) = update.scopes {
            // Only what is added must be grantable: keeping a scope the
            // caller may not grant (say `admin`, approved by the operator)
            // is not granting it.
            let added = ScopeSet::from_bits(scopes.bits() & !app.scopes.bits());
            m.may_grant(added)?;
        }
        self.update_client(org, id, update, origin).await
    }

    /// Deletes an application the caller reaches (D46): everything it holds
    /// stops working at once, on every node.
    pub async fn delete_application(
        &self,
        m: &Manager,
        org: &OrgId,
        id: &ClientId,
        origin: &Origin,
    ) -> AppResult<()> {
        self.managed_application(m, org, id).await?;
        self.delete_client(org, id, origin).await
    }

    /// A new secret for an application (D46, D20): the previous one works
    /// for `grace_secs` (at most 7 days); a public application has none (422).
    pub async fn rotate_application_secret(
        &self,
        m: &Manager,
        org: &OrgId,
        id: &ClientId,
        grace_secs: u64,
        origin: &Origin,
    ) -> AppResult<RotatedSecret> {
        if grace_secs > MAX_SECRET_GRACE_SECS {
            return Err(AppError::invalid(
                "grace_seconds",
                format!("must be at most {MAX_SECRET_GRACE_SECS} (7 days)"),
            ));
        }
        let app = self.managed_application(m, org, id).await?;
        m.may_reconfigure(&app)?;
        self.rotate_client_secret(id, grace_secs, origin).await
    }

    /// The API keys the caller reaches (revoked ones too), oldest first;
    /// with `owner`, only that person's (D46 continued).
    pub async fn list_keys(
        &self,
        m: &Manager,
        org: &OrgId,
        owner: Option<UserId>,
        page: Page,
    ) -> AppResult<Listing<ApiKey>> {
        let all: Vec<ApiKey> = api_key_store(self)
            .list_api_keys(org)
            .await
            .or_app(Resource::ApiKey)?
            .into_iter()
            .filter(|k| m.reaches(k.owner.as_ref()))
            .filter(|k| owner.is_none() || k.owner == owner)
            .collect();
        Ok(page_of(&all, page))
    }

    /// An API key of `org` the caller reaches; any other is 404 (D46).
    pub async fn managed_key(&self, m: &Manager, org: &OrgId, id: &ApiKeyId) -> AppResult<ApiKey> {
        match api_key_store(self)
            .get_api_key(org, id)
            .await
            .or_app(Resource::ApiKey)?
        {
            Some(k) if m.reaches(k.owner.as_ref()) => Ok(k),
            _ => Err(AppError::NotFound(Resource::ApiKey)),
        }
    }

    /// Creates an API key for the caller (D46): no scope it does not hold,
    /// none of the sign-in scopes; a person becomes its owner. The key is
    /// returned only now.
    pub async fn create_key(
        &self,
        m: &Manager,
        org: &OrgId,
        req: KeyRequest,
        origin: &Origin,
    ) -> AppResult<(ApiKey, String)> {
        m.may_grant(req.scopes)?;
        if req.expires_at.is_some_and(|e| e <= Timestamp::now()) {
            return Err(AppError::invalid("expires_at", "must be in the future"));
        }
        let staging = self.auth().is_some_and(|a| a.config().staging);
        self.insert_key(org, req, m.owner().cloned(), staging, origin)
            .await
    }

    /// Revokes an API key the caller reaches (D46); revoking twice keeps
    /// the first time.
    pub async fn revoke_key(
        &self,
        m: &Manager,
        org: &OrgId,
        id: &ApiKeyId,
        origin: &Origin,
    ) -> AppResult<ApiKey> {
        self.managed_key(m, org, id).await?;
        api_key_store(self)
            .revoke_api_key(org, id, Timestamp::now(), &self.teller(origin))
            .await
            .or_app(Resource::ApiKey)
    }

    /// Per-minute usage of a credential the caller reaches (D46), one
    /// bucket per minute of `range`, zero-filled, oldest first.
    pub async fn usage(
        &self,
        org: &OrgId,
        credential: &Credential,
        range: UsageRange,
    ) -> AppResult<Vec<UsageBucket>> {
        let stored = usage_store(self)
            .usage(org, credential, range)
            .await
            .or_app(Resource::Any)?;
        let mut stored = stored.into_iter().peekable();
        Ok(range
            .minutes()
            .map(|minute| {
                let mut b = UsageBucket {
                    start: Timestamp::from_millis(minute * 60_000),
                    requests: 0,
                    rejected: 0,
                };
                while let Some(UsageMinute { minute: m, .. }) = stored.peek() {
                    if *m > minute {
                        break;
                    }
                    let s = stored.next().expect("peeked");
                    if s.minute == minute {
                        b.requests += s.requests;
                        b.rejected += s.rejected;
                    }
                }
                b
            })
            .collect())
    }

    /// The caller's organization (D46 `GET /v1/organization`).
    pub async fn organization(&self, org: &OrgId) -> AppResult<Organization> {
        self.existing_org(org).await
    }

    /// Stores a new key; the one place keys are made (the API and the CLI).
    pub(crate) async fn insert_key(
        &self,
        org: &OrgId,
        req: KeyRequest,
        owner: Option<gatehouse_domain::UserId>,
        staging: bool,
        origin: &Origin,
    ) -> AppResult<(ApiKey, String)> {
        if req.scopes.is_empty() {
            return Err(AppError::invalid("scopes", "must name at least one scope"));
        }
        if !req.scopes.intersect(ScopeSet::identity()).is_empty() {
            // D49: openid, profile and email are for signing people in.
            return Err(AppError::invalid(
                "scopes",
                "openid, profile and email are for signing people in and cannot be given to an API key",
            ));
        }
        let key = secrets::new_api_key(staging);
        let record = ApiKey {
            id: ApiKeyId::generate(),
            org: org.clone(),
            name: req.name.into_string(),
            scopes: req.scopes,
            prefix: key_prefix(&key),
            owner,
            expires_at: req.expires_at,
            created_at: Timestamp::now(),
            last_used_at: None,
            revoked_at: None,
        };
        api_key_store(self)
            .insert_api_key(
                org,
                &record,
                &secrets::hash_secret(&key),
                &self.teller(origin),
            )
            .await
            .or_app(Resource::ApiKey)?;
        Ok((record, key))
    }
}

/// This area's view of storage: the `ClientStore` trait only (issue 25).
fn client_store(app: &App) -> &dyn gatehouse_store::ClientStore {
    app.0.store.as_ref()
}

/// This area's view of storage: the `ApiKeyStore` trait only (issue 25).
fn api_key_store(app: &App) -> &dyn gatehouse_store::ApiKeyStore {
    app.0.store.as_ref()
}

/// This area's view of storage: the `UsageStore` trait only (issue 25).
fn usage_store(app: &App) -> &dyn gatehouse_store::UsageStore {
    app.0.store.as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_slice_and_count_everything() {
        let items: Vec<u32> = (0..5).collect();
        let l = page_of(
            &items,
            Page {
                limit: 2,
                offset: 3,
            },
        );
        assert_eq!((l.items, l.total), (vec![3, 4], 5));
        let l = page_of(
            &items,
            Page {
                limit: 2,
                offset: 9,
            },
        );
        assert_eq!((l.items.len(), l.total), (0, 5));
    }
}
