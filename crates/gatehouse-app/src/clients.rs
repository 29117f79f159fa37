//! Client applications: registration (D20, D22), secret rotation, the
//! operator's approval of `admin`.

use gatehouse_auth::secrets;
use gatehouse_domain::{
    Client, ClientId, DomainError, Name, OrgId, RedirectUri, ScopeSet, Timestamp, UserId,
};
use gatehouse_store::NewClient;

use crate::App;
use crate::Resource;
use crate::error::{AppError, AppResult, OrApp};

/// A client application to register.
#[derive(Clone, Debug)]
pub struct ClientRegistration {
    pub name: Name,
    pub scopes: ScopeSet,
    pub redirect_uris: Vec<RedirectUri>,
    /// D49: where RP-initiated logout may send the person (D20's rules).
    pub post_logout_redirect_uris: Vec<RedirectUri>,
    /// D20: a public client has no secret.
    pub public: bool,
    pub owner: Option<UserId>,
}

/// A registered client and its secret, shown only now.
#[derive(Clone, Debug)]
pub struct Registered {
    pub client: Client,
    pub secret: Option<String>,
}

/// A rotated secret, shown only now, and until when the previous one works.
#[derive(Clone, Debug)]
pub struct RotatedSecret {
    pub client: Client,
    pub secret: String,
    pub previous_valid_until: Option<Timestamp>,
}

impl App {
    pub async fn register_client(
        &self,
        org: &OrgId,
        reg: ClientRegistration,
    ) -> AppResult<Registered> {
        if reg.scopes.is_empty() {
            return Err(AppError::invalid("scopes", "must name at least one scope"));
        }
        if reg.public && reg.redirect_uris.is_empty() {
            // D20: a public client can use only the authorization-code grant.
            return Err(AppError::invalid(
                "redirect_uri",
                "is required for a public client (it can use only the authorization-code grant)",
            ));
        }
        let secret = (!reg.public).then(secrets::new_client_secret);
        let new = NewClient {
            id: ClientId::generate(),
            name: reg.name.into_string(),
            secret_hash: secret.as_deref().map(secrets::hash_secret),
            scopes: reg.scopes,
            redirect_uris: reg
                .redirect_uris
                .into_iter()
                .map(RedirectUri::into_string)
                .collect(),
            post_logout_redirect_uris: reg
                .post_logout_redirect_uris
                .into_iter()
                .map(RedirectUri::into_string)
                .collect(),
            // Registering `admin` is not approving it (D22): approve_admin does that.
            admin_approved: false,
            owner: reg.owner,
            created_at: Timestamp::now(),
        };
        let client = self
            .store()
            .insert_client(org, &new)
            .await
            .or_app(Resource::Client)?;
        Ok(Registered { client, secret })
    }

    /// D20: a new secret; the previous one keeps working for `grace_secs`.
    pub async fn rotate_client_secret(
        &self,
        id: &ClientId,
        grace_secs: u64,
    ) -> AppResult<RotatedSecret> {
        let c = self.find_client(id).await?;
        if c.is_public() {
            return Err(AppError::Rule(DomainError::InvalidStateTransition(
                format!("{id} is a public client: it has no secret"),
            )));
        }
        let secret = secrets::new_client_secret();
        let until = (grace_secs > 0)
            .then(|| Timestamp::now().plus_seconds(grace_secs.min(i64::MAX as u64 / 2000) as i64));
        let client = self
            .store()
            .rotate_client_secret(&c.org, id, &secrets::hash_secret(&secret), until)
            .await
            .or_app(Resource::Client)?;
        Ok(RotatedSecret {
            client,
            secret,
            previous_valid_until: until,
        })
    }

    /// D22: the client may now be granted `admin`.
    pub async fn approve_admin(&self, id: &ClientId) -> AppResult<Client> {
        let c = self.find_client(id).await?;
        self.store()
            .approve_admin(&c.org, id)
            .await
            .or_app(Resource::Client)
    }

    /// An operator names a client by its id alone; the id establishes the
    /// organization, as when the client authenticates.
    async fn find_client(&self, id: &ClientId) -> AppResult<Client> {
        self.store()
            .resolve_client(id)
            .await
            .or_app(Resource::Client)?
            .ok_or(AppError::NotFound(Resource::Client))
    }
}
