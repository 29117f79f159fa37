//! Operator commands (D40). With `--json` each prints exactly one JSON object
//! on stdout; without, readable lines. Each parses its arguments, calls the
//! application layer ([`App`]) and prints the result.

use std::io::BufRead;

use anyhow::Context;
use gatehouse_app::clients::ClientRegistration;
use gatehouse_app::orgs::NewOrg;
use gatehouse_app::{App, AppError};
use gatehouse_domain::{
    ApiKey, ApiKeyId, ClientId, DomainError, Email, Name, OrgId, Plan, RedirectUri, Role, Scope,
    ScopeSet, UserId,
};
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

/// An application error as an operator reads it: invalid fields named by
/// their flags.
fn msg(e: AppError) -> anyhow::Error {
    match e {
        AppError::Rule(DomainError::Validation(issues)) => anyhow::anyhow!(
            "{}",
            issues
                .iter()
                .map(|i| format!("{} {}", flag(&i.field), i.issue))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        AppError::Duplicate { field, .. } => {
            anyhow::anyhow!("a record with this {field} already exists")
        }
        other => other.into(),
    }
}

fn flag(field: &str) -> String {
    match field {
        "password" => "the password".into(),
        f => format!("--{}", f.replace('_', "-")),
    }
}

/// `msg`, with "no <what> <raw>" for a record the operator named that does not exist.
fn named(raw: &str) -> impl FnOnce(AppError) -> anyhow::Error + '_ {
    move |e| match e {
        AppError::NotFound(what) => anyhow::anyhow!("no {what} {raw}"),
        other => msg(other),
    }
}

fn org_id(raw: &str) -> anyhow::Result<OrgId> {
    OrgId::parse(raw).with_context(|| format!("{raw} is not an organization id (org_…)"))
}

async fn existing_org(app: &App, raw: &str) -> anyhow::Result<OrgId> {
    let id = org_id(raw)?;
    app.existing_org(&id).await.map_err(named(raw))?;
    Ok(id)
}

fn scopes(raw: &str) -> anyhow::Result<ScopeSet> {
    ScopeSet::parse(raw).map_err(|w| anyhow::anyhow!("--scopes: unknown scope {w}"))
}

pub async fn org(app: &App, cmd: OrgCommand, env: Env) -> anyhow::Result<Output> {
    match cmd {
        OrgCommand::Create {
            name,
            plan,
            per_minute,
            per_second,
        } => {
            let name = Name::parse(&name).map_err(|e| anyhow::anyhow!("--name {e}"))?;
            let plan = plan
                .as_deref()
                .map(Plan::parse)
                .transpose()
                .map_err(|e| anyhow::anyhow!("--plan {e}"))?;
            let new = NewOrg {
                name,
                plan,
                per_minute,
                per_second,
            };
            // D33: a staging organization starts with the fixture data.
            let org = app
                .create_org(new, env == Env::Staging)
                .await
                .map_err(msg)?;
            Ok(Output(
                json!({ "id": org.id, "name": org.name, "plan": org.plan.as_str() }),
            ))
        }
        OrgCommand::Set { org, v2_preview } => {
            let id = existing_org(app, &org).await?;
            if let Some(v) = v2_preview {
                app.set_v2_preview(&id, v == "on").await.map_err(msg)?;
            }
            let o = app.existing_org(&id).await.map_err(named(&org))?;
            Ok(Output(json!({
                "id": o.id, "name": o.name, "plan": o.plan.as_str(),
                "per_minute": o.limits().0, "per_second": o.limits().1,
                "v2_preview": app.v2_preview(&id).await.map_err(msg)?,
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
        "post_logout_redirect_uris": c.post_logout_redirect_uris,
        "owner": c.owner,
    })
}

fn client_id(raw: &str) -> anyhow::Result<ClientId> {
    ClientId::parse(raw).with_context(|| format!("{raw} is not a client id (app_…)"))
}

pub async fn client(app: &App, cmd: ClientCommand) -> anyhow::Result<Output> {
    match cmd {
        ClientCommand::Create {
            org,
            name,
            scopes: raw_scopes,
            redirect_uris,
            post_logout_redirect_uris,
            public,
            owner,
        } => {
            let org = existing_org(app, &org).await?;
            let scopes = scopes(&raw_scopes)?;
            let mut uris = Vec::new();
            for u in &redirect_uris {
                uris.push(
                    RedirectUri::parse(u)
                        .map_err(|e| anyhow::anyhow!("--redirect-uri {u}: {e}"))?,
                );
            }
            let mut logout_uris = Vec::new();
            for u in &post_logout_redirect_uris {
                logout_uris.push(
                    RedirectUri::parse(u)
                        .map_err(|e| anyhow::anyhow!("--post-logout-redirect-uri {u}: {e}"))?,
                );
            }
            let owner = owner
                .map(|o| UserId::parse(&o).with_context(|| format!("{o} is not a user id (usr_…)")))
                .transpose()?;
            let name = Name::parse(&name).map_err(|e| anyhow::anyhow!("--name {e}"))?;
            let reg = ClientRegistration {
                name,
                scopes,
                redirect_uris: uris,
                post_logout_redirect_uris: logout_uris,
                public,
                owner,
            };
            let r = app.register_client(&org, reg).await.map_err(msg)?;
            Ok(Output(client_json(&r.client, r.secret.as_deref())))
        }
        ClientCommand::RotateSecret {
            client_id: raw,
            grace,
        } => {
            let id = client_id(&raw)?;
            let r = app
                .rotate_client_secret(&id, grace)
                .await
                .map_err(named(&raw))?;
            let mut out = client_json(&r.client, Some(&r.secret));
            out["previous_secret_valid_until"] = json!(r.previous_valid_until);
            Ok(Output(out))
        }
        ClientCommand::ApproveAdmin { client_id: raw } => {
            let id = client_id(&raw)?;
            let c = app.approve_admin(&id).await.map_err(named(&raw))?;
            Ok(Output(client_json(&c, None)))
        }
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

pub async fn user(app: &App, cmd: UserCommand) -> anyhow::Result<Output> {
    match cmd {
        UserCommand::Create {
            org,
            email,
            name,
            role,
            password_stdin: _,
        } => {
            let org = existing_org(app, &org).await?;
            let email = Email::parse(&email).map_err(|e| anyhow::anyhow!("--email {e}"))?;
            let name = Name::parse(&name).map_err(|e| anyhow::anyhow!("--name {e}"))?;
            let role = Role::parse(&role).map_err(|e| anyhow::anyhow!("--role {e}"))?;
            let pw = read_password_line(&mut std::io::stdin().lock())?;
            let u = app
                .create_active_user(&org, email, name, role, pw)
                .await
                .map_err(msg)?;
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

pub async fn apikey(app: &App, cmd: ApiKeyCommand, env: Env) -> anyhow::Result<Output> {
    match cmd {
        ApiKeyCommand::Create {
            org,
            name,
            scopes: raw_scopes,
        } => {
            let org = existing_org(app, &org).await?;
            let scopes = scopes(&raw_scopes)?;
            let name = Name::parse(&name).map_err(|e| anyhow::anyhow!("--name {e}"))?;
            // D33: staging keys are gk_test_…
            let (record, key) = app
                .create_api_key(&org, name, scopes, env == Env::Staging)
                .await
                .map_err(msg)?;
            let scopes: Vec<&str> = record.scopes.iter().map(Scope::as_str).collect();
            // D27: exactly these fields; the key is shown only now.
            Ok(Output(
                json!({ "id": record.id, "key": key, "org": record.org, "scopes": scopes }),
            ))
        }
        ApiKeyCommand::Revoke { key_id } => {
            let id = ApiKeyId::parse(&key_id)
                .with_context(|| format!("{key_id} is not an API key id (key_…)"))?;
            let k = app.revoke_api_key(&id).await.map_err(named(&key_id))?;
            Ok(Output(api_key_json(&k)))
        }
    }
}

pub async fn keys(
    app: &App,
    master: &gatehouse_auth::MasterKey,
    cmd: crate::config::KeysCommand,
) -> anyhow::Result<Output> {
    match cmd {
        crate::config::KeysCommand::Rotate { publish_delay } => {
            let rec = app
                .rotate_signing_key(master, publish_delay)
                .await
                .map_err(msg)?;
            Ok(Output(
                json!({ "ok": true, "kid": rec.kid, "published_at": rec.created_at, "signs_from": rec.activates_at }),
            ))
        }
    }
}

/// `gatehouse staging reset` (D33): the fixture restored now, atomically.
pub async fn staging(app: &App, cmd: StagingCommand) -> anyhow::Result<Output> {
    match cmd {
        StagingCommand::Reset => {
            let n = app.reset_staging().await.map_err(msg)?;
            Ok(Output(json!({ "ok": true, "organizations": n })))
        }
    }
}
