//! Client applications: registration (D20, D22), secret rotation, the
//! operator's approval of `admin`.

use gatehouse_auth::secrets;
use gatehouse_domain::event::Origin;
use gatehouse_domain::{Client, ClientId, Name, OrgId, RedirectUri, ScopeSet, Timestamp, UserId};
use gatehouse_store::{ClientChanges, NewClient};

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

/// What to change in a client application (D46 PATCH, D47 `client
/// update`); `None` keeps the field.
#[derive(Clone, Debug, Default)]
pub struct ClientUpdate {
    pub name: Option<Name>,
    /// D20's rules, already checked by [`RedirectUri::parse`].
    pub redirect_uris: Option<Vec<RedirectUri>>,
    pub post_logout_redirect_uris: Option<Vec<RedirectUri>>,
    pub scopes: Option<ScopeSet>,
    /// D46 (revised): move it to this user (an active user of its
    /// organization).
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
        origin: &Origin,
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
        let client = client_store(self)
            .insert_client(org, &new, &self.teller(origin))
            .await
            .or_app(Resource::Client)?;
        Ok(Registered { client, secret })
    }

    /// D20: a new secret; the previous one keeps working for `grace_secs`.
    pub async fn rotate_client_secret(
        &self,
        id: &ClientId,
        grace_secs: u64,
        origin: &Origin,
    ) -> AppResult<RotatedSecret> {
        // Whether it has a secret to rotate, and whether a grace is allowed
        // (D46 revised), is `client::check_rotation`'s, in the transaction.
        let c = self.find_client(id).await?;
        let secret = secrets::new_client_secret();
        let until = (grace_secs > 0)
            .then(|| Timestamp::now().plus_seconds(grace_secs.min(i64::MAX as u64 / 2000) as i64));
        let client = client_store(self)
            .rotate_client_secret(
                &c.org,
                id,
                &secrets::hash_secret(&secret),
                until,
                &self.teller(origin),
            )
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
        client_store(self)
            .approve_admin(&c.org, id, &self.teller(&Origin::operator()))
            .await
            .or_app(Resource::Client)
    }

    /// The organization's client applications, oldest first.
    pub async fn list_clients(&self, org: &OrgId) -> AppResult<Vec<Client>> {
        self.existing_org(org).await?;
        client_store(self)
            .list_clients(org)
            .await
            .or_app(Resource::Client)
    }

    /// A client of `org`; another organization's is `NotFound` (D2).
    pub async fn client(&self, org: &OrgId, id: &ClientId) -> AppResult<Client> {
        let c = self.find_client(id).await?;
        if &c.org != org {
            return Err(AppError::NotFound(Resource::Client));
        }
        Ok(c)
    }

    /// An operator's look-up of a client by id alone (D47 `client show`).
    pub async fn operator_client(&self, id: &ClientId) -> AppResult<Client> {
        self.find_client(id).await
    }

    /// Changes a client of `org` (D46, D47). The rules, the same for the CLI
    /// and the API:
    /// - at least one scope; a public client keeps at least one redirect URI
    ///   (it can use only the authorization-code grant, D20);
    /// - listing `admin` never approves it: only [`App::approve_admin`]
    ///   does (D22, D46), and dropping it withdraws the approval;
    /// - a scope removed revokes, at once and on every node, the client's
    ///   refresh chains and access tokens that carry it, and is removed from
    ///   the consents people gave it (D46 revised, D49);
    /// - a new owner is an active user of the organization; moved away from
    ///   a deactivated or deleted owner, a confidential client refuses its
    ///   secret until it is rotated with no grace (D46 revised).
    ///
    /// The caller-specific checks of the API (D46: which scopes the caller
    /// must hold) belong to the caller; the operator holds them all.
    pub async fn update_client(
        &self,
        org: &OrgId,
        id: &ClientId,
        update: ClientUpdate,
        origin: &Origin,
    ) -> AppResult<Client> {
        let old = self.client(org, id).await?;
        if let Some(owner) = &update.owner {
            // D46 (revised): another organization's user is 404 (`user not
            // found`); whether they are active is the move's rule
            // (`client::move_owner`), decided in its transaction.
            self.get_user(org, owner).await?;
        }
        if update.scopes.is_some_and(ScopeSet::is_empty) {
            return Err(AppError::invalid("scopes", "must name at least one scope"));
        }
        if old.is_public() && update.redirect_uris.as_ref().is_some_and(Vec::is_empty) {
            return Err(AppError::invalid(
                "redirect_uri",
                "is required for a public client (it can use only the authorization-code grant)",
            ));
        }
        let changes = ClientChanges {
            name: update.name.map(Name::into_string),
            redirect_uris: update
                .redirect_uris
                .map(|v| v.into_iter().map(RedirectUri::into_string).collect()),
            post_logout_redirect_uris: update
                .post_logout_redirect_uris
                .map(|v| v.into_iter().map(RedirectUri::into_string).collect()),
            scopes: update.scopes,
            owner: update.owner,
        };
        let now = Timestamp::now();
        let client = client_store(self)
            .update_client(org, id, &changes, now, &self.teller(origin))
            .await
            .or_app(Resource::Client)?;
        if !old.scopes.is_subset(client.scopes) || old.suspension != client.suspension {
            // The revocations the change wrote (D46 revised: the tokens
            // carrying a removed scope; those of a newly suspended
            // application) hold on this node from the next request.
            self.sync_revocations().await?;
        }
        Ok(client)
    }

    /// Deletes a client of `org` and everything it holds (D46, D47): every
    /// token, refresh chain, code and session-bound chain stops working at
    /// once, on every node (a revocation record, as deleting a user does).
    pub async fn delete_client(
        &self,
        org: &OrgId,
        id: &ClientId,
        origin: &Origin,
    ) -> AppResult<()> {
        self.client(org, id).await?;
        let now = Timestamp::now();
        client_store(self)
            .delete_client(org, id, now, &self.teller(origin))
            .await
            .or_app(Resource::Client)?;
        self.note_client_revoked(id, now);
        Ok(())
    }

    /// An operator names a client by its id alone; the id establishes the
    /// organization, as when the client authenticates.
    async fn find_client(&self, id: &ClientId) -> AppResult<Client> {
        client_store(self)
            .resolve_client(id)
            .await
            .or_app(Resource::Client)?
            .ok_or(AppError::NotFound(Resource::Client))
    }
}

/// This area's view of storage: the `ClientStore` trait only (issue 25).
fn client_store(app: &App) -> &dyn gatehouse_store::ClientStore {
    app.0.store.as_ref()
}
