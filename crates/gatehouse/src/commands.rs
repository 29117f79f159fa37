//! Operator commands (D40). With `--json` each prints exactly one JSON object
//! on stdout; without, readable lines.

use std::io::BufRead;

use anyhow::{Context, bail};
use gatehouse_auth::{password, secrets};
use gatehouse_domain::{
    ApiKey, ApiKeyId, ClientId, Email, Fixture, Name, NewUser, OrgId, Organization, Plan,
    RedirectUri, Role, Scope, ScopeSet, Timestamp, UserId, UserStatus,
};
use gatehouse_store::{NewClient, Store, StoreError};
use serde_json::{Value, json};

use crate::config::{ApiKeyCommand, ClientCommand, Env, OrgCommand, StagingCommand, UserCommand};

/// What a command prints.
pub struct Output(pub Value);

impl Output {
    pub fn print(&self, as_json: bool) {
        if as_json {
            println!("{}", self.0);
            return;
        }
        if let Value::Object(m) = &self.0 {
            for (k, v) in m {
                match v {
                    Value::String(s) => println!("{k}: {s}"),
                    other => println!("{k}: {other}"),
                }
            }
        }
    }
}

fn org_id(raw: &str) -> anyhow::Result<OrgId> {
    OrgId::parse(raw).with_context(|| format!("{raw} is not an organization id (org_…)"))
}

async fn existing_org(store: &dyn Store, raw: &str) -> anyhow::Result<OrgId> {
    let id = org_id(raw)?;
    if store.get_org(&id).await?.is_none() {
        bail!("no organization {raw}");
    }
    Ok(id)
}

pub async fn org(store: &dyn Store, cmd: OrgCommand, env: Env) -> anyhow::Result<Output> {
    match cmd {
        OrgCommand::Create {
            name,
            plan,
            per_minute,
            per_second,
        } => {
            let name = Name::parse(&name).map_err(|e| anyhow::anyhow!("--name {e}"))?;
            let custom = per_minute.is_some() || per_second.is_some();
            let plan = match plan.as_deref() {
                Some(p) => Plan::parse(p).map_err(|e| anyhow::anyhow!("--plan {e}"))?,
                None if custom => Plan::Enterprise,
                None => Plan::Free,
            };
            if custom && plan != Plan::Enterprise {
                bail!(
                    "--per-minute and --per-second set an enterprise plan's limits; use --plan enterprise"
                );
            }
            if per_minute == Some(0) || per_second == Some(0) {
                bail!("limits must be at least 1");
            }
            let org = Organization {
                id: OrgId::generate(),
                name: name.into_string(),
                plan,
                per_minute,
                per_second,
                created_at: Timestamp::now(),
            };
            store.create_org(&org).await?;
            if env == Env::Staging {
                // D33: a staging organization starts with the fixture data.
                store
                    .reset_to_fixture(Some(&org.id), &Fixture::standard(), Timestamp::now())
                    .await?;
            }
            Ok(Output(
                json!({ "id": org.id, "name": org.name, "plan": org.plan.as_str() }),
            ))
        }
        OrgCommand::Set { org, v2_preview } => {
            let id = existing_org(store, &org).await?;
            if let Some(v) = v2_preview {
                store.set_v2_preview(&id, v == "on").await?;
            }
            let o = store
                .get_org(&id)
                .await?
                .with_context(|| format!("no organization {org}"))?;
            Ok(Output(json!({
                "id": o.id, "name": o.name, "plan": o.plan.as_str(),
                "per_minute": o.limits().0, "per_second": o.limits().1,
                "v2_preview": store.v2_preview(&id).await?,
            })))
        }
    }
}

fn client_json(c: &gatehouse_domain::Client, secret: Option<&str>) -> Value {
    let scopes: Vec<&str> = c.scopes.iter().map(Scope::as_str).collect();
    json!({
        "client_id": c.id,
        "client_secret": secret,
        "org": c.org,
        "scopes": scopes,
        "name": c.name,
        "public": c.is_public(),
        "admin_approved": c.admin_approved,
        "redirect_uris": c.redirect_uris,
        "owner": c.owner,
    })
}

pub async fn client(store: &dyn Store, cmd: ClientCommand) -> anyhow::Result<Output> {
    match cmd {
        ClientCommand::Create {
            org,
            name,
            scopes,
            redirect_uris,
            public,
            owner,
        } => {
            let org = existing_org(store, &org).await?;
            let scopes = ScopeSet::parse(&scopes)
                .map_err(|w| anyhow::anyhow!("--scopes: unknown scope {w}"))?;
            if scopes.is_empty() {
                bail!("--scopes must name at least one scope");
            }
            let mut uris = Vec::new();
            for u in &redirect_uris {
                uris.push(
                    RedirectUri::parse(u)
                        .map_err(|e| anyhow::anyhow!("--redirect-uri {u}: {e}"))?
                        .into_string(),
                );
            }
            if public && uris.is_empty() {
                bail!(
                    "a public client needs at least one --redirect-uri (it can use only the authorization-code grant)"
                );
            }
            let owner = owner
                .map(|o| UserId::parse(&o).with_context(|| format!("{o} is not a user id (usr_…)")))
                .transpose()?;
            let secret = (!public).then(secrets::new_client_secret);
            let new = NewClient {
                id: ClientId::generate(),
                name: Name::parse(&name)
                    .map_err(|e| anyhow::anyhow!("--name {e}"))?
                    .into_string(),
                secret_hash: secret.as_deref().map(secrets::hash_secret),
                scopes,
                redirect_uris: uris,
                // Registering `admin` is not approving it (D22): approve-admin does that.
                admin_approved: false,
                owner,
                created_at: Timestamp::now(),
            };
            let c = store.insert_client(&org, &new).await.map_err(store_msg)?;
            Ok(Output(client_json(&c, secret.as_deref())))
        }
        ClientCommand::RotateSecret { client_id, grace } => {
            let id = ClientId::parse(&client_id)
                .with_context(|| format!("{client_id} is not a client id (app_…)"))?;
            let c = store
                .find_client(&id)
                .await?
                .with_context(|| format!("no client {client_id}"))?;
            if c.is_public() {
                bail!("{client_id} is a public client: it has no secret");
            }
            let secret = secrets::new_client_secret();
            let until = (grace > 0)
                .then(|| Timestamp::now().plus_seconds(grace.min(i64::MAX as u64 / 2000) as i64));
            let c = store
                .rotate_client_secret(&c.org, &id, &secrets::hash_secret(&secret), until)
                .await?;
            let mut out = client_json(&c, Some(&secret));
            out["previous_secret_valid_until"] = json!(until);
            Ok(Output(out))
        }
        ClientCommand::ApproveAdmin { client_id } => {
            let id = ClientId::parse(&client_id)
                .with_context(|| format!("{client_id} is not a client id (app_…)"))?;
            let c = store
                .find_client(&id)
                .await?
                .with_context(|| format!("no client {client_id}"))?;
            let c = store.approve_admin(&c.org, &id).await?;
            Ok(Output(client_json(&c, None)))
        }
    }
}

fn store_msg(e: StoreError) -> anyhow::Error {
    match e {
        StoreError::Rule(gatehouse_domain::DomainError::Validation(issues)) => anyhow::anyhow!(
            "{}",
            issues
                .iter()
                .map(|i| format!("{} {}", i.field, i.issue))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        StoreError::Duplicate(f) => anyhow::anyhow!("a record with this {f} already exists"),
        other => other.into(),
    }
}

/// Reads one line and drops its trailing newline (D40 `--password-stdin`).
pub fn read_password_line(input: &mut impl BufRead) -> anyhow::Result<String> {
    let mut line = String::new();
    input
        .read_line(&mut line)
        .context("reading the password from standard input")?;
    if line.ends_with('\n') {
        line.pop();
        if line.ends_with('\r') {
            line.pop();
        }
    }
    Ok(line)
}

pub async fn user(store: &dyn Store, cmd: UserCommand) -> anyhow::Result<Output> {
    match cmd {
        UserCommand::Create {
            org,
            email,
            name,
            role,
            password_stdin: _,
        } => {
            let org = existing_org(store, &org).await?;
            let email = Email::parse(&email).map_err(|e| anyhow::anyhow!("--email {e}"))?;
            let name = Name::parse(&name).map_err(|e| anyhow::anyhow!("--name {e}"))?;
            let role = Role::parse(&role).map_err(|e| anyhow::anyhow!("--role {e}"))?;
            let pw = read_password_line(&mut std::io::stdin().lock())?;
            password::check_policy(&pw, email.as_str())
                .map_err(|e| anyhow::anyhow!("the password {e}"))?;
            let hash = tokio::task::spawn_blocking(move || password::hash_blocking(&pw)).await?;
            let new = NewUser {
                id: UserId::generate(),
                email,
                name,
                role,
                status: UserStatus::Active,
                password_hash: Some(hash),
                created_at: Timestamp::now(),
            };
            let u = store.insert_user(&org, &new).await.map_err(store_msg)?;
            Ok(Output(serde_json::to_value(&u)?))
        }
    }
}

fn api_key_json(k: &ApiKey) -> Value {
    let scopes: Vec<&str> = k.scopes.iter().map(Scope::as_str).collect();
    json!({
        "id": k.id,
        "org": k.org,
        "name": k.name,
        "scopes": scopes,
        "created_at": k.created_at,
        "revoked_at": k.revoked_at,
    })
}

pub async fn apikey(store: &dyn Store, cmd: ApiKeyCommand, env: Env) -> anyhow::Result<Output> {
    match cmd {
        ApiKeyCommand::Create { org, name, scopes } => {
            let org = existing_org(store, &org).await?;
            let scopes = ScopeSet::parse(&scopes)
                .map_err(|w| anyhow::anyhow!("--scopes: unknown scope {w}"))?;
            if scopes.is_empty() {
                bail!("--scopes must name at least one scope");
            }
            let name = Name::parse(&name)
                .map_err(|e| anyhow::anyhow!("--name {e}"))?
                .into_string();
            // D33: staging keys are gk_test_…
            let key = secrets::new_api_key(env == Env::Staging);
            let record = ApiKey {
                id: ApiKeyId::generate(),
                org,
                name,
                scopes,
                created_at: Timestamp::now(),
                revoked_at: None,
            };
            store
                .insert_api_key(&record, &secrets::hash_secret(&key))
                .await?;
            let scopes: Vec<&str> = record.scopes.iter().map(Scope::as_str).collect();
            // D27: exactly these fields; the key is shown only now.
            Ok(Output(
                json!({ "id": record.id, "key": key, "org": record.org, "scopes": scopes }),
            ))
        }
        ApiKeyCommand::Revoke { key_id } => {
            let id = ApiKeyId::parse(&key_id)
                .with_context(|| format!("{key_id} is not an API key id (key_…)"))?;
            let k = store
                .find_api_key(&id)
                .await?
                .with_context(|| format!("no API key {key_id}"))?;
            let k = store.revoke_api_key(&k.org, &id, Timestamp::now()).await?;
            Ok(Output(api_key_json(&k)))
        }
    }
}

pub async fn keys(
    store: &dyn Store,
    master: &gatehouse_auth::MasterKey,
    cmd: crate::config::KeysCommand,
) -> anyhow::Result<Output> {
    match cmd {
        crate::config::KeysCommand::Rotate { publish_delay } => {
            let delay = publish_delay.min(365 * 86400) as i64;
            let rec = gatehouse_auth::KeyRing::rotate(store, master, delay).await?;
            Ok(Output(
                json!({ "ok": true, "kid": rec.kid, "published_at": rec.created_at, "signs_from": rec.activates_at }),
            ))
        }
    }
}

/// `gatehouse staging reset` (D33): the fixture restored now, atomically.
pub async fn staging(store: &dyn Store, cmd: StagingCommand) -> anyhow::Result<Output> {
    match cmd {
        StagingCommand::Reset => {
            let n = store
                .reset_to_fixture(None, &Fixture::standard(), Timestamp::now())
                .await?;
            Ok(Output(json!({ "ok": true, "organizations": n })))
        }
    }
}
