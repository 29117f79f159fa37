//! Operator commands (D40, D47). With `--json` each prints exactly one JSON
//! object on stdout; without, readable lines. Each parses its arguments,
//! calls the application layer ([`App`]) and prints the result: every rule
//! lives in the application layer, which the management API calls too.
//!
//! A failure is a [`Failure`] with the code `--json` prints (the API's codes
//! of D6 where they fit); [`error_json`] is the one mapping from an error to
//! `{"error": {"code", "message"}}`.

use std::io::BufRead;

use anyhow::Context;
use gatehouse_app::clients::{ClientRegistration, ClientUpdate};
use gatehouse_app::orgs::NewOrg;
use gatehouse_app::{App, AppError, UserFilter};
use gatehouse_domain::event::Origin;
use gatehouse_domain::{
    ApiKey, ApiKeyId, ClientId, DomainError, Email, Name, OrgId, Organization, Page, Plan,
    RedirectUri, Role, Scope, ScopeSet, SearchText, User, UserId, UserPatch, UserStatus,
};
use gatehouse_server::ErrorCode;
use serde_json::{Value, json};

use crate::config::{
    ApiKeyCommand, AuditCommand, ClientCommand, Env, OrgCommand, StagingCommand, UserCommand,
    WebhookCommand,
};

/// What a command prints: the JSON value, and for lists the text a person
/// reads instead of `key: value` lines.
pub struct Output {
    pub value: Value,
    pub text: Option<String>,
}

impl Output {
    pub fn new(value: Value) -> Self {
        Self { value, text: None }
    }

    fn with_text(value: Value, text: String) -> Self {
        Self {
            value,
            text: Some(text),
        }
    }

    pub fn print(&self, as_json: bool) {
        crate::out::print(&self.render(as_json));
    }

    /// What [`Output::print`] writes.
    pub fn render(&self, as_json: bool) -> String {
        use std::fmt::Write;
        if as_json {
            return format!("{}\n", self.value);
        }
        if let Some(text) = &self.text {
            return text.clone();
        }
        let mut out = String::new();
        if let Value::Object(m) = &self.value {
            for (k, v) in m {
                let shown = match v {
                    Value::String(s) => s.clone(),
                    Value::Null => "-".to_owned(),
                    Value::Array(a) => a
                        .iter()
                        .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned))
                        .collect::<Vec<_>>()
                        .join(" "),
                    other => other.to_string(),
                };
                let _ = writeln!(out, "{k}: {shown}");
            }
        }
        out
    }
}

/// A failed command: the code `--json` prints and the message for a person.
#[derive(Debug)]
pub struct Failure {
    pub code: &'static str,
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// The code of a command that found no database where it was told to look
/// (D47: only `serve`, `migrate` and `mock` create one).
pub const DATABASE_NOT_FOUND: &str = "DATABASE_NOT_FOUND";
/// The code of a configuration that cannot be used (an unreadable `--config`
/// file, contradictory settings).
pub const CONFIGURATION_ERROR: &str = "CONFIGURATION_ERROR";

pub fn failure(code: &'static str, message: impl Into<String>) -> anyhow::Error {
    Failure {
        code,
        message: message.into(),
    }
    .into()
}

/// An argument the operator gave that is not acceptable.
fn invalid(message: impl Into<String>) -> anyhow::Error {
    failure(ErrorCode::ValidationError.as_str(), message)
}

/// D47: `{"error": {"code", "message"}}` for a failed command. The code is
/// the innermost [`Failure`]'s; an error that carries none is `INTERNAL_ERROR`.
pub fn error_json(e: &anyhow::Error) -> Value {
    let code = e
        .chain()
        .find_map(|c| c.downcast_ref::<Failure>())
        .map_or(ErrorCode::InternalError.as_str(), |f| f.code);
    json!({ "error": { "code": code, "message": format!("{e:#}") } })
}

/// A master-key rotation's error as an operator reads it.
fn key_msg(e: gatehouse_app::master_key::MasterKeyError) -> anyhow::Error {
    use gatehouse_app::master_key::MasterKeyError;
    match e {
        MasterKeyError::Store(e) => msg(AppError::store(e, gatehouse_app::Resource::Storage)),
        e @ MasterKeyError::SameKey(_) => {
            failure(ErrorCode::ValidationError.as_str(), e.to_string())
        }
        e => failure(ErrorCode::InternalError.as_str(), e.to_string()),
    }
}

/// An application error as an operator reads it: invalid fields named by
/// their flags.
fn msg(e: AppError) -> anyhow::Error {
    // The API's code for the same error (D6's one mapping, in gatehouse-server).
    let code = ErrorCode::of(&e).as_str();
    let message = match e {
        AppError::Rule(DomainError::Validation(issues)) => issues
            .iter()
            .map(|i| format!("{} {}", flag(&i.field), i.issue))
            .collect::<Vec<_>>()
            .join("; "),
        AppError::Duplicate { field, .. } => format!("a record with this {field} already exists"),
        other => other.to_string(),
    };
    failure(code, message)
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
        AppError::NotFound(what) => failure(
            ErrorCode::ResourceNotFound.as_str(),
            format!("no {what} {raw}"),
        ),
        other => msg(other),
    }
}

/// The organization a command names (issue 32, D40/D47 continued): `--org`
/// (or `GATEHOUSE_ORG`) takes an id or a name (any case; refused when two
/// organizations share it); left out, the one organization there is.
async fn existing_org(app: &App, raw: Option<&str>) -> anyhow::Result<OrgId> {
    let Some(raw) = raw else {
        let orgs = app.list_orgs().await.map_err(msg)?;
        return match orgs.as_slice() {
            [one] => Ok(one.id.clone()),
            [] => Err(failure(
                ErrorCode::ResourceNotFound.as_str(),
                "there is no organization yet (`gatehouse org create --name NAME`)",
            )),
            many => Err(invalid(format!(
                "--org is needed: there are {} organizations (`gatehouse org list`); give an id or a name, or set GATEHOUSE_ORG",
                many.len()
            ))),
        };
    };
    if let Some(id) = OrgId::parse(raw) {
        app.existing_org(&id).await.map_err(named(raw))?;
        return Ok(id);
    }
    let wanted = raw.to_lowercase();
    let orgs = app.list_orgs().await.map_err(msg)?;
    let named_so: Vec<_> = orgs
        .iter()
        .filter(|o| o.name.as_str().to_lowercase() == wanted)
        .collect();
    match named_so.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => Err(failure(
            ErrorCode::ResourceNotFound.as_str(),
            format!("no organization {raw} (neither an id nor a name; `gatehouse org list`)"),
        )),
        many => Err(invalid(format!(
            "{} organizations are named {raw}; give its id ({})",
            many.len(),
            many.iter()
                .map(|o| o.id.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

fn client_id(raw: &str) -> anyhow::Result<ClientId> {
    ClientId::parse(raw).ok_or_else(|| invalid(format!("{raw} is not a client id (app_…)")))
}

fn user_id(raw: &str) -> anyhow::Result<UserId> {
    UserId::parse(raw).ok_or_else(|| invalid(format!("{raw} is not a user id (usr_…)")))
}

fn api_key_id(raw: &str) -> anyhow::Result<ApiKeyId> {
    ApiKeyId::parse(raw).ok_or_else(|| invalid(format!("{raw} is not an API key id (key_…)")))
}

fn scopes(raw: &str) -> anyhow::Result<ScopeSet> {
    ScopeSet::parse(raw).map_err(|w| invalid(format!("--scopes: unknown scope {w}")))
}

fn name(raw: &str) -> anyhow::Result<Name> {
    Name::parse(raw).map_err(|e| invalid(format!("--name {e}")))
}

/// D20's rules for each URI of a repeated flag.
fn redirect_uris(flag: &str, raw: &[String]) -> anyhow::Result<Vec<RedirectUri>> {
    raw.iter()
        .map(|u| RedirectUri::parse(u).map_err(|e| invalid(format!("--{flag} {u}: {e}"))))
        .collect()
}

fn scope_names(s: ScopeSet) -> Vec<&'static str> {
    s.iter().map(Scope::as_str).collect()
}

/// Rows under a header, each column as wide as its widest cell.
fn table(header: &[&str], rows: &[Vec<String>], empty: &str) -> String {
    if rows.is_empty() {
        return format!("{empty}\n");
    }
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, cell) in width.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&width).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

fn org_json(o: &Organization, v2_preview: bool) -> Value {
    json!({
        "id": o.id, "name": o.name, "plan": o.plan.as_str(),
        "per_minute": o.limits().0, "per_second": o.limits().1,
        "v2_preview": v2_preview,
        "created_at": o.created_at,
    })
}

pub async fn org(app: &App, cmd: OrgCommand, env: Env) -> anyhow::Result<Output> {
    match cmd {
        OrgCommand::Create {
            name: raw_name,
            plan,
            per_minute,
            per_second,
        } => {
            let name = name(&raw_name)?;
            let plan = plan
                .as_deref()
                .map(Plan::parse)
                .transpose()
                .map_err(|e| invalid(format!("--plan {e}")))?;
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
            Ok(Output::new(
                json!({ "id": org.id, "name": org.name, "plan": org.plan.as_str() }),
            ))
        }
        OrgCommand::List => {
            let orgs = app.list_orgs().await.map_err(msg)?;
            let rows = orgs
                .iter()
                .map(|o| {
                    vec![
                        o.id.to_string(),
                        o.plan.as_str().to_owned(),
                        format!("{}/min {}/s", o.limits().0, o.limits().1),
                        o.name.clone(),
                    ]
                })
                .collect::<Vec<_>>();
            let data: Vec<Value> = orgs
                .iter()
                .map(|o| {
                    json!({
                        "id": o.id, "name": o.name, "plan": o.plan.as_str(),
                        "per_minute": o.limits().0, "per_second": o.limits().1,
                        "created_at": o.created_at,
                    })
                })
                .collect();
            Ok(Output::with_text(
                json!({ "data": data }),
                table(
                    &["ID", "PLAN", "LIMITS", "NAME"],
                    &rows,
                    "No organizations yet (`gatehouse org create --name NAME`).",
                ),
            ))
        }
        OrgCommand::Show { org } => {
            let id = existing_org(app, Some(&org)).await?;
            let o = app.existing_org(&id).await.map_err(named(&org))?;
            let v2 = app.v2_preview(&id).await.map_err(msg)?;
            Ok(Output::new(org_json(&o, v2)))
        }
        OrgCommand::Rename { org, name: raw } => {
            let id = existing_org(app, Some(&org)).await?;
            let o = app
                .rename_org(&id, name(&raw)?)
                .await
                .map_err(named(&org))?;
            let v2 = app.v2_preview(&id).await.map_err(msg)?;
            Ok(Output::new(org_json(&o, v2)))
        }
        OrgCommand::Plan {
            org,
            plan,
            per_minute,
            per_second,
        } => {
            let id = existing_org(app, Some(&org)).await?;
            let plan = plan
                .as_deref()
                .map(Plan::parse)
                .transpose()
                .map_err(|e| invalid(format!("--plan {e}")))?;
            if plan.is_none() && per_minute.is_none() && per_second.is_none() {
                return Err(invalid(
                    "give --plan (free, pro or enterprise), or an enterprise plan's --per-minute and --per-second",
                ));
            }
            let o = app
                .change_plan(&id, plan, per_minute, per_second)
                .await
                .map_err(msg)?;
            let v2 = app.v2_preview(&id).await.map_err(msg)?;
            Ok(Output::new(org_json(&o, v2)))
        }
        OrgCommand::Set { org, v2_preview } => {
            let id = existing_org(app, Some(&org)).await?;
            if let Some(v) = v2_preview {
                app.set_v2_preview(&id, v == "on").await.map_err(msg)?;
            }
            let o = app.existing_org(&id).await.map_err(named(&org))?;
            let v2 = app.v2_preview(&id).await.map_err(msg)?;
            let mut out = org_json(&o, v2);
            // `org set` has always printed these fields only.
            if let Some(m) = out.as_object_mut() {
                m.remove("created_at");
            }
            Ok(Output::new(out))
        }
    }
}

fn client_json(c: &gatehouse_domain::Client, secret: Option<&str>) -> Value {
    json!({
        "client_id": c.id,
        "client_secret": secret,
        "org": c.org,
        "scopes": scope_names(c.scopes),
        "name": c.name,
        "public": c.is_public(),
        "admin_approved": c.admin_approved,
        "redirect_uris": c.redirect_uris,
        "post_logout_redirect_uris": c.post_logout_redirect_uris,
        "owner": c.owner,
        "suspended_reason": c.suspended_reason().map(|r| r.as_str()),
        "created_at": c.created_at,
    })
}

/// A client as `show`, `list` and `update` print it: no secret field at all.
fn client_record(c: &gatehouse_domain::Client) -> Value {
    let mut v = client_json(c, None);
    if let Some(m) = v.as_object_mut() {
        m.remove("client_secret");
    }
    v
}

pub async fn client(app: &App, cmd: ClientCommand) -> anyhow::Result<Output> {
    match cmd {
        ClientCommand::Create {
            org,
            name: raw_name,
            scopes: raw_scopes,
            redirect_uris: raw_uris,
            post_logout_redirect_uris,
            public,
            owner,
        } => {
            let org = existing_org(app, org.as_deref()).await?;
            let scopes = scopes(&raw_scopes)?;
            let uris = redirect_uris("redirect-uri", &raw_uris)?;
            let logout_uris =
                redirect_uris("post-logout-redirect-uri", &post_logout_redirect_uris)?;
            let owner = owner.as_deref().map(user_id).transpose()?;
            let name = name(&raw_name)?;
            let reg = ClientRegistration {
                name,
                scopes,
                redirect_uris: uris,
                post_logout_redirect_uris: logout_uris,
                public,
                owner,
            };
            let r = app
                .register_client(&org, reg, &Origin::operator())
                .await
                .map_err(msg)?;
            Ok(Output::new(client_json(&r.client, r.secret.as_deref())))
        }
        ClientCommand::List { org } => {
            let org = existing_org(app, org.as_deref()).await?;
            let clients = app.list_clients(&org).await.map_err(msg)?;
            let rows = clients
                .iter()
                .map(|c| {
                    vec![
                        c.id.to_string(),
                        if c.is_public() {
                            "public"
                        } else {
                            "confidential"
                        }
                        .to_owned(),
                        scope_names(c.scopes).join(" "),
                        // D46 (revised): who answers for it ("-": nobody
                        // recorded, docs/security.md says what to do).
                        c.owner
                            .as_ref()
                            .map_or_else(|| "-".to_owned(), |u| u.to_string()),
                        c.suspended_reason().map_or("-", |r| r.as_str()).to_owned(),
                        c.name.clone(),
                    ]
                })
                .collect::<Vec<_>>();
            let data: Vec<Value> = clients.iter().map(client_record).collect();
            Ok(Output::with_text(
                json!({ "data": data }),
                table(
                    &["CLIENT_ID", "TYPE", "SCOPES", "OWNER", "SUSPENDED", "NAME"],
                    &rows,
                    "No client applications in this organization.",
                ),
            ))
        }
        ClientCommand::Show { client_id: raw } => {
            let id = client_id(&raw)?;
            let c = app.operator_client(&id).await.map_err(named(&raw))?;
            Ok(Output::new(client_record(&c)))
        }
        ClientCommand::Update {
            client_id: raw,
            name: raw_name,
            redirect_uris: raw_uris,
            post_logout_redirect_uris,
            scopes: raw_scopes,
            owner,
        } => {
            let id = client_id(&raw)?;
            let update = ClientUpdate {
                owner: owner.as_deref().map(user_id).transpose()?,
                name: raw_name.as_deref().map(name).transpose()?,
                redirect_uris: (!raw_uris.is_empty())
                    .then(|| redirect_uris("redirect-uri", &raw_uris))
                    .transpose()?,
                post_logout_redirect_uris: (!post_logout_redirect_uris.is_empty())
                    .then(|| redirect_uris("post-logout-redirect-uri", &post_logout_redirect_uris))
                    .transpose()?,
                scopes: raw_scopes.as_deref().map(scopes).transpose()?,
            };
            let c = app.operator_client(&id).await.map_err(named(&raw))?;
            let c = app
                .update_client(&c.org, &id, update, &Origin::operator())
                .await
                .map_err(named(&raw))?;
            Ok(Output::new(client_record(&c)))
        }
        ClientCommand::Delete { client_id: raw } => {
            let id = client_id(&raw)?;
            let c = app.operator_client(&id).await.map_err(named(&raw))?;
            app.delete_client(&c.org, &id, &Origin::operator())
                .await
                .map_err(named(&raw))?;
            Ok(Output::with_text(
                json!({ "ok": true, "deleted": id }),
                format!("Deleted {id} ({}); its tokens no longer work.\n", c.name),
            ))
        }
        ClientCommand::RotateSecret {
            client_id: raw,
            grace,
        } => {
            let id = client_id(&raw)?;
            let r = app
                .rotate_client_secret(&id, grace, &Origin::operator())
                .await
                .map_err(named(&raw))?;
            let mut out = client_json(&r.client, Some(&r.secret));
            out["previous_secret_valid_until"] = json!(r.previous_valid_until);
            Ok(Output::new(out))
        }
        ClientCommand::ApproveAdmin { client_id: raw } => {
            let id = client_id(&raw)?;
            let c = app.approve_admin(&id).await.map_err(named(&raw))?;
            Ok(Output::new(client_json(&c, None)))
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

/// `--password-stdin`: the first line of standard input; at a terminal, a
/// prompt that does not echo, twice, so a typing mistake is caught before it
/// becomes the password (issue 32).
fn new_password() -> anyhow::Result<String> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() {
        return read_password_line(&mut std::io::stdin().lock());
    }
    let first = rpassword::prompt_password("Password: ").context("reading the password")?;
    let again = rpassword::prompt_password("Password (again): ").context("reading the password")?;
    if first != again {
        return Err(invalid(
            "the two passwords differ; nothing was created".to_owned(),
        ));
    }
    Ok(first)
}

fn user_rows(users: &[User]) -> Vec<Vec<String>> {
    users
        .iter()
        .map(|u| {
            vec![
                u.id.to_string(),
                u.role.as_str().to_owned(),
                u.status.as_str().to_owned(),
                u.email.to_string(),
                u.name.to_string(),
            ]
        })
        .collect()
}

pub async fn user(app: &App, cmd: UserCommand) -> anyhow::Result<Output> {
    match cmd {
        UserCommand::Create {
            org,
            email,
            name: raw_name,
            role,
            password_stdin: _,
        } => {
            let org = existing_org(app, org.as_deref()).await?;
            let email = Email::parse(&email).map_err(|e| invalid(format!("--email {e}")))?;
            let name = name(&raw_name)?;
            let role = Role::parse(&role).map_err(|e| invalid(format!("--role {e}")))?;
            let pw = new_password()?;
            let u = app
                .create_active_user(&org, email, name, role, pw)
                .await
                .map_err(msg)?;
            Ok(Output::new(serde_json::to_value(&u)?))
        }
        UserCommand::List {
            org,
            role,
            status,
            q,
            limit,
            offset,
        } => {
            let org = existing_org(app, org.as_deref()).await?;
            let filter = UserFilter {
                role: role
                    .as_deref()
                    .map(Role::parse)
                    .transpose()
                    .map_err(|e| invalid(format!("--role {e}")))?,
                status: status
                    .as_deref()
                    .map(UserStatus::parse)
                    .transpose()
                    .map_err(|e| invalid(format!("--status {e}")))?,
                q: match q.as_deref() {
                    Some(q) => SearchText::parse(q).map_err(|e| invalid(format!("--q {e}")))?,
                    None => None,
                },
            };
            // The same use case as GET /v1/users, page by page: one page
            // with --limit, else every page.
            let max = gatehouse_domain::page::MAX_LIMIT;
            let mut users = Vec::new();
            let mut page = Page {
                limit: limit.unwrap_or(max),
                offset,
            };
            let total = loop {
                let listing = app.list_users(&org, &filter, page).await.map_err(msg)?;
                let n = listing.items.len() as u64;
                users.extend(listing.items);
                if limit.is_some() || n < u64::from(page.limit) || n == 0 {
                    break listing.total;
                }
                page.offset += n;
            };
            let text = table(
                &["ID", "ROLE", "STATUS", "EMAIL", "NAME"],
                &user_rows(&users),
                "No users match.",
            ) + &format!("{} of {total} shown\n", users.len());
            Ok(Output::with_text(
                json!({ "data": users, "total": total }),
                text,
            ))
        }
        UserCommand::Show { user_id: raw } => {
            let id = user_id(&raw)?;
            let u = app.operator_user(&id).await.map_err(named(&raw))?;
            Ok(Output::new(serde_json::to_value(&u)?))
        }
        UserCommand::Update {
            user_id: raw,
            name: raw_name,
            role,
        } => {
            let patch = UserPatch {
                name: raw_name.as_deref().map(name).transpose()?,
                role: role
                    .as_deref()
                    .map(Role::parse)
                    .transpose()
                    .map_err(|e| invalid(format!("--role {e}")))?,
                status: None,
            };
            change_user(app, &raw, &patch).await
        }
        UserCommand::Deactivate { user_id: raw } => {
            let patch = UserPatch {
                status: Some(UserStatus::Inactive),
                ..UserPatch::default()
            };
            change_user(app, &raw, &patch).await
        }
        UserCommand::Activate { user_id: raw } => {
            let patch = UserPatch {
                status: Some(UserStatus::Active),
                ..UserPatch::default()
            };
            change_user(app, &raw, &patch).await
        }
        UserCommand::Delete {
            user_id: raw,
            transfer_to,
        } => {
            let id = user_id(&raw)?;
            let to = transfer_to.as_deref().map(user_id).transpose()?;
            let org = app.org_of_user(&id).await.map_err(named(&raw))?;
            app.delete_user(&org, &id, to.as_ref(), &Origin::operator())
                .await
                .map_err(named(&raw))?;
            Ok(Output::with_text(
                json!({ "ok": true, "deleted": id, "org": org }),
                match &to {
                    Some(to) => format!("Deleted {id}; their applications now belong to {to}.\n"),
                    None => format!("Deleted {id}.\n"),
                },
            ))
        }
        UserCommand::ResetPassword { user_id: raw } => {
            let id = user_id(&raw)?;
            let org = app.org_of_user(&id).await.map_err(named(&raw))?;
            let u = app
                .operator_reset_password(&org, &id)
                .await
                .map_err(named(&raw))?;
            Ok(Output::with_text(
                json!({ "ok": true, "id": u.id, "org": org, "reset_email_to": u.email }),
                format!("A reset link was e-mailed to {}.\n", u.email),
            ))
        }
        UserCommand::ResetMfa { user_id: raw } => {
            let id = user_id(&raw)?;
            let org = app.operator_reset_mfa(&id).await.map_err(named(&raw))?;
            Ok(Output::with_text(
                json!({ "id": id, "org": org, "mfa_reset": true }),
                format!(
                    "Every second factor and recovery code of {id} was removed; their sessions ended and their tokens were revoked.\n"
                ),
            ))
        }
    }
}

/// `user update`, `deactivate`, `activate`: the API's use case (the same
/// rules, events, revocations and audit entries), as the operator.
async fn change_user(app: &App, raw: &str, patch: &UserPatch) -> anyhow::Result<Output> {
    let id = user_id(raw)?;
    let org = app.org_of_user(&id).await.map_err(named(raw))?;
    let u = app
        .update_user(&org, &id, patch, &Origin::operator())
        .await
        .map_err(named(raw))?;
    Ok(Output::new(serde_json::to_value(&u)?))
}

fn api_key_json(k: &ApiKey) -> Value {
    json!({
        "id": k.id,
        "org": k.org,
        "name": k.name,
        "scopes": scope_names(k.scopes),
        // D46: what the management API shows of a key, the same here.
        "prefix": k.prefix,
        "owner": k.owner,
        "expires_at": k.expires_at,
        "created_at": k.created_at,
        "last_used_at": k.last_used_at,
        "revoked_at": k.revoked_at,
    })
}

pub async fn apikey(app: &App, cmd: ApiKeyCommand, env: Env) -> anyhow::Result<Output> {
    match cmd {
        ApiKeyCommand::Create {
            org,
            name: raw_name,
            scopes: raw_scopes,
        } => {
            let org = existing_org(app, org.as_deref()).await?;
            let scopes = scopes(&raw_scopes)?;
            let name = name(&raw_name)?;
            // D33: staging keys are gk_test_…
            let (record, key) = app
                .create_api_key(&org, name, scopes, env == Env::Staging)
                .await
                .map_err(msg)?;
            // D27: exactly these fields; the key is shown only now.
            Ok(Output::new(
                json!({ "id": record.id, "key": key, "org": record.org, "scopes": scope_names(record.scopes) }),
            ))
        }
        ApiKeyCommand::List { org } => {
            let org = existing_org(app, org.as_deref()).await?;
            let keys = app.list_api_keys(&org).await.map_err(msg)?;
            let rows = keys
                .iter()
                .map(|k| {
                    vec![
                        k.id.to_string(),
                        if k.revoked_at.is_some() {
                            "revoked"
                        } else if !k.is_live(gatehouse_domain::Timestamp::now()) {
                            "expired"
                        } else {
                            "active"
                        }
                        .to_owned(),
                        scope_names(k.scopes).join(" "),
                        k.last_used_at
                            .map_or_else(|| "never".to_owned(), |t| t.to_rfc3339()),
                        k.owner
                            .as_ref()
                            .map_or_else(|| "-".to_owned(), |u| u.to_string()),
                        k.name.clone(),
                    ]
                })
                .collect::<Vec<_>>();
            let data: Vec<Value> = keys.iter().map(api_key_json).collect();
            Ok(Output::with_text(
                json!({ "data": data }),
                table(
                    &["ID", "STATE", "SCOPES", "LAST USED", "OWNER", "NAME"],
                    &rows,
                    "No API keys in this organization.",
                ),
            ))
        }
        ApiKeyCommand::Revoke { key_id } => {
            let id = api_key_id(&key_id)?;
            let k = app.revoke_api_key(&id).await.map_err(named(&key_id))?;
            Ok(Output::new(api_key_json(&k)))
        }
        ApiKeyCommand::Show { key_id } => {
            let id = api_key_id(&key_id)?;
            let k = app.operator_api_key(&id).await.map_err(named(&key_id))?;
            Ok(Output::new(api_key_json(&k)))
        }
    }
}

fn endpoint_json(e: &gatehouse_domain::webhook::Endpoint) -> Value {
    // What `GET /v1/webhook-endpoints/{id}` shows; never the secret.
    json!({
        "id": e.id,
        "url": e.url,
        "description": e.description,
        "enabled_events": e.enabled_events.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
        "ordering": e.ordering.as_str(),
        "status": e.status(),
        "disabled_reason": e.disabled.map(|r| r.as_str()),
        "owner_id": e.owner,
        "created_at": e.created_at,
        "updated_at": e.updated_at,
    })
}

fn attempt_json(a: &gatehouse_domain::webhook::Attempt) -> Value {
    json!({
        "id": a.id,
        "event": a.event,
        "attempt": a.attempt,
        "trigger": a.trigger.as_str(),
        "status": a.status(),
        "started_at": a.started_at,
        "duration_ms": a.duration_ms,
        "response_status": a.response_status,
        "error": a.error.map(|e| e.as_str()),
        "next_attempt_at": a.next_attempt_at,
    })
}

/// The code of `gatehouse audit verify` finding a chain that does not
/// hold (D58).
pub const AUDIT_CHAIN_BROKEN: &str = "AUDIT_CHAIN_BROKEN";

/// `gatehouse audit verify` (D47 continued, D58).
pub async fn audit(
    app: &App,
    cmd: AuditCommand,
    master: Option<gatehouse_auth::MasterKey>,
) -> anyhow::Result<Output> {
    use gatehouse_domain::audit::Category;
    let categories = |c: Option<&str>| -> anyhow::Result<Vec<Category>> {
        match c {
            None => Ok(Category::ALL.to_vec()),
            Some(c) => Ok(vec![Category::parse(c).ok_or_else(|| {
                invalid(format!("--category {c:?} must be admin or security"))
            })?]),
        }
    };
    match cmd {
        AuditCommand::Checkpoint { org, category } => {
            let org = existing_org(app, org.as_deref()).await?;
            let master = master.ok_or_else(|| failure(CONFIGURATION_ERROR, "no master key"))?;
            let mut made = Vec::new();
            let mut lines = String::new();
            for category in categories(category.as_deref())? {
                match app
                    .operator_checkpoint(&org, category, master.clone())
                    .await
                    .map_err(msg)?
                {
                    Some(c) => {
                        lines.push_str(&format!(
                            "{} chain: checkpoint at sequence {} (hash {}, key {})\n",
                            category.as_str(),
                            c.sequence,
                            c.hash,
                            c.kid
                        ));
                        made.push(json!({
                            "category": category.as_str(),
                            "sequence": c.sequence,
                            "hash": c.hash,
                            "signed_at": c.signed_at,
                            "jws": c.jws,
                        }));
                    }
                    None => lines.push_str(&format!(
                        "{} chain: no entry yet, nothing to sign\n",
                        category.as_str()
                    )),
                }
            }
            Ok(Output::with_text(json!({ "data": made }), lines))
        }
        AuditCommand::Verify {
            org,
            category,
            checkpoints,
        } => {
            let org = existing_org(app, org.as_deref()).await?;
            // The file is read first: a wrong path fails before any work.
            let given = match checkpoints {
                None => None,
                Some(path) => Some(given_checkpoints(&path)?),
            };
            let mut chains = Vec::new();
            let mut lines = String::new();
            for category in categories(category.as_deref())? {
                match app.verify_audit(&org, category).await.map_err(msg)? {
                    Ok(v) => {
                        lines.push_str(&format!(
                            "{} chain: {} entries verified, last sequence {} (hash {})\n",
                            category.as_str(),
                            v.count,
                            v.last_sequence,
                            v.last_hash
                        ));
                        chains.push(json!({
                            "category": category.as_str(),
                            "count": v.count,
                            "last_sequence": v.last_sequence,
                            "last_hash": v.last_hash,
                        }));
                    }
                    Err(broken) => return Err(failure(AUDIT_CHAIN_BROKEN, broken.to_string())),
                }
            }
            let mut doc = json!({ "ok": true, "chains": chains });
            if let Some(given) = given {
                match app
                    .verify_audit_checkpoints(&org, &given)
                    .await
                    .map_err(msg)?
                {
                    Ok(found) => {
                        lines.push_str(&format!(
                            "checkpoints: {} held by the chains, {} before the oldest kept entry (purged)\n",
                            found.held, found.purged
                        ));
                        doc["checkpoints"] = json!({ "held": found.held, "purged": found.purged });
                    }
                    Err(broken) => return Err(failure(AUDIT_CHAIN_BROKEN, broken.to_string())),
                }
            }
            Ok(Output::with_text(doc, lines))
        }
    }
}

/// The checkpoints of `gatehouse audit verify --checkpoints FILE`: one per
/// non-empty line, a compact JWS, or a JSON object with a `jws` member (a
/// checkpoint as listed, or an `audit.checkpoint` event as received).
fn given_checkpoints(
    path: &std::path::Path,
) -> anyhow::Result<Vec<gatehouse_app::audit::GivenCheckpoint>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| invalid(format!("--checkpoints {}: {e}", path.display())))?;
    let mut given = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let jws = if line.starts_with('{') {
            let v: Value = serde_json::from_str(line).map_err(|e| {
                invalid(format!(
                    "--checkpoints {} line {}: {e}",
                    path.display(),
                    i + 1
                ))
            })?;
            let found = v["jws"]
                .as_str()
                .or_else(|| v["data"]["object"]["jws"].as_str())
                .map(str::to_owned);
            found.ok_or_else(|| {
                invalid(format!(
                    "--checkpoints {} line {}: no jws member",
                    path.display(),
                    i + 1
                ))
            })?
        } else {
            line.to_owned()
        };
        given.push(gatehouse_app::audit::GivenCheckpoint { line: i + 1, jws });
    }
    Ok(given)
}

/// `gatehouse webhook list|show` (D47 continued, D55).
pub async fn webhook(app: &App, cmd: WebhookCommand) -> anyhow::Result<Output> {
    match cmd {
        WebhookCommand::List { org } => {
            let org = existing_org(app, org.as_deref()).await?;
            let all = app.operator_list_endpoints(&org).await.map_err(msg)?;
            let rows = all
                .iter()
                .map(|e| {
                    vec![
                        e.id.to_string(),
                        match e.disabled {
                            None => "enabled".to_owned(),
                            Some(r) => format!("disabled ({})", r.as_str()),
                        },
                        e.enabled_events
                            .iter()
                            .map(|p| p.as_str())
                            .collect::<Vec<_>>()
                            .join(" "),
                        e.url.clone(),
                    ]
                })
                .collect::<Vec<_>>();
            let data: Vec<Value> = all.iter().map(endpoint_json).collect();
            Ok(Output::with_text(
                json!({ "data": data }),
                table(
                    &["ID", "STATUS", "EVENTS", "URL"],
                    &rows,
                    "No webhook endpoints in this organization.",
                ),
            ))
        }
        WebhookCommand::Show { endpoint_id } => {
            let id = gatehouse_domain::EndpointId::parse(&endpoint_id).ok_or_else(|| {
                invalid(format!("{endpoint_id} is not a webhook endpoint id (we_…)"))
            })?;
            let (org, e, attempts) = app
                .operator_show_endpoint(&id)
                .await
                .map_err(named(&endpoint_id))?;
            let mut value = endpoint_json(&e);
            value["org"] = json!(org);
            value["attempts"] = json!(attempts.items.iter().map(attempt_json).collect::<Vec<_>>());
            let rows = attempts
                .items
                .iter()
                .map(|a| {
                    vec![
                        a.started_at
                            .or(a.next_attempt_at)
                            .map_or_else(|| "-".to_owned(), |t| t.to_rfc3339()),
                        a.event.to_string(),
                        a.attempt.to_string(),
                        a.status().to_owned(),
                        a.response_status
                            .map_or_else(|| "-".to_owned(), |s| s.to_string()),
                        a.error.map_or("-", |e| e.as_str()).to_owned(),
                    ]
                })
                .collect::<Vec<_>>();
            let text = format!(
                "{} {} ({})\norg: {org}\nevents: {}\nordering: {}\nowner: {}\n\nLatest attempts ({} in all):\n{}",
                e.id,
                e.url,
                match e.disabled {
                    None => "enabled".to_owned(),
                    Some(r) => format!("disabled: {}", r.as_str()),
                },
                e.enabled_events
                    .iter()
                    .map(|p| p.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
                e.ordering.as_str(),
                e.owner
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |u| u.to_string()),
                attempts.total,
                table(
                    &["WHEN", "EVENT", "ATTEMPT", "STATUS", "HTTP", "ERROR"],
                    &rows,
                    "No attempts yet.",
                )
            );
            Ok(Output::with_text(value, text))
        }
    }
}

pub async fn keys(
    app: &App,
    master: gatehouse_auth::MasterKey,
    cmd: crate::config::KeysCommand,
) -> anyhow::Result<Output> {
    // D23 (continued): during a master-key rotation a new signing key is
    // sealed with the next key.
    let master = app
        .operator_master_keys(master)
        .await
        .map_err(|e| msg(AppError::store(e, gatehouse_app::Resource::Storage)))?;
    match cmd {
        crate::config::KeysCommand::Rotate { publish_delay } => {
            let rec = app
                .rotate_signing_key(&master, publish_delay)
                .await
                .map_err(msg)?;
            Ok(Output::new(
                json!({ "ok": true, "kid": rec.kid, "published_at": rec.created_at, "signs_from": rec.activates_at }),
            ))
        }
        crate::config::KeysCommand::List => keys_list(app).await,
    }
}

/// `gatehouse keys list`: the signing keys and where each stands in D23's
/// schedule (`gatehouse_auth::keys::schedule`, the rule the key ring itself
/// signs and publishes by). Public parts only.
pub async fn keys_list(app: &App) -> anyhow::Result<Output> {
    let records = app.signing_key_records().await.map_err(msg)?;
    let now = gatehouse_domain::Timestamp::now();
    let keys = gatehouse_auth::keys::schedule(&records, now);
    let data: Vec<Value> = keys
        .iter()
        .map(|k| {
            json!({
                "kid": k.record.kid,
                "state": k.state.as_str(),
                "published_at": k.record.created_at,
                "signs_from": k.record.activates_at,
                "retire_after": k.retire_at,
            })
        })
        .collect();
    let rows: Vec<Vec<String>> = keys
        .iter()
        .map(|k| {
            vec![
                k.record.kid.clone(),
                k.state.as_str().to_owned(),
                k.record.created_at.to_string(),
                k.record.activates_at.to_string(),
                k.retire_at
                    .map_or_else(|| "-".to_owned(), |t| t.to_string()),
            ]
        })
        .collect();
    Ok(Output::with_text(
        json!({ "data": data }),
        table(
            &["KID", "STATE", "PUBLISHED", "SIGNS FROM", "RETIRES"],
            &rows,
            "No signing keys yet (the first start of `gatehouse serve` makes one).",
        ),
    ))
}

/// A token given on the command line, or read from standard input for `-`.
fn token_argument(token: &str) -> anyhow::Result<String> {
    if token != "-" {
        return Ok(token.trim().to_owned());
    }
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("reading the token from standard input")?;
    let t = line.trim();
    if t.is_empty() {
        return Err(invalid("no token on standard input"));
    }
    Ok(t.to_owned())
}

/// `gatehouse token introspect|revoke TOKEN` (issue 32): D49's answer and
/// D25's revocation for any organization's token, through the use cases
/// the endpoints share (`App::operator_introspect`, `App::operator_revoke`).
pub async fn token(app: &App, cmd: crate::config::TokenCommand) -> anyhow::Result<Output> {
    use crate::config::TokenCommand;
    let oauth = |e: gatehouse_auth::OAuthError| {
        failure(ErrorCode::ServiceUnavailable.as_str(), e.to_string())
    };
    match cmd {
        TokenCommand::Introspect { token } => {
            let token = token_argument(&token)?;
            let answer = app.operator_introspect(&token).await.map_err(oauth)?;
            let body = serde_json::to_value(
                gatehouse_server::api::introspect::IntrospectionResponse::from(answer),
            )?;
            let text = match body.as_object() {
                Some(o) if body["active"] == true => o
                    .iter()
                    .map(|(k, v)| match v {
                        Value::String(s) => format!("{k}: {s}\n"),
                        other => format!("{k}: {other}\n"),
                    })
                    .collect(),
                _ => "active: false (malformed, forged, expired, revoked or unknown)\n".to_owned(),
            };
            Ok(Output::with_text(body, text))
        }
        TokenCommand::Revoke { token } => {
            use gatehouse_app::oauth::OperatorRevocation as R;
            let token = token_argument(&token)?;
            let done = app.operator_revoke(&token).await.map_err(oauth)?;
            let (value, text) = match done {
                R::RefreshChain { org } => (
                    json!({"revoked": "refresh_chain", "org": org}),
                    format!("Revoked the refresh token's chain (every token of that sign-in) in {org}.\n"),
                ),
                R::AccessToken { org, jti } => (
                    json!({"revoked": "access_token", "org": org, "jti": jti}),
                    format!("Revoked access token {jti} in {org}.\n"),
                ),
                R::ApiKey { org, id } => (
                    json!({"revoked": "api_key", "org": org, "id": id}),
                    format!("Revoked API key {id} in {org}.\n"),
                ),
                R::Nothing => (
                    json!({"revoked": null}),
                    "Nothing to revoke: the token is malformed, forged, expired, unknown or already revoked.\n"
                        .to_owned(),
                ),
            };
            Ok(Output::with_text(value, text))
        }
    }
}

/// `gatehouse master-key rotate --new-key-file F` (D23 continued, D47
/// continued): every sealed value re-sealed under the new key while servers
/// run; the rotation ends, then the new key replaces `master.key` (when the
/// key is kept there). Stopped between the two, the database is under the
/// new key and `master.key` still holds the old one: a second run with the
/// same file finds nothing to re-seal and writes the file.
pub async fn master_key(
    app: &App,
    current: (gatehouse_auth::MasterKey, crate::MasterKeySource),
    cmd: crate::config::MasterKeyCommand,
) -> anyhow::Result<Output> {
    let crate::config::MasterKeyCommand::Rotate { new_key_file, wait } = cmd;
    let text = std::fs::read_to_string(&new_key_file)
        .with_context(|| format!("reading the new key at {}", new_key_file.display()))?;
    let next = gatehouse_auth::MasterKey::parse(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", new_key_file.display()))?;
    let (current, source) = current;
    let rotated = app
        .rotate_master_key(&current, &next, std::time::Duration::from_secs(wait))
        .await
        .map_err(key_msg)?;
    app.end_master_key_rotation(&next).await.map_err(key_msg)?;
    if let crate::MasterKeySource::File(path) = &source {
        crate::write_private_file(path, next.to_text().as_bytes())?;
    }
    let total: u64 = rotated.resealed.values().sum();
    let file = match &source {
        crate::MasterKeySource::File(p) => Some(p.display().to_string()),
        crate::MasterKeySource::Environment => None,
    };
    let value = json!({
        "ok": true,
        "key_id": rotated.key_id,
        "resealed": rotated.resealed,
        "already_under_new_key": rotated.already,
        "master_key_file": file,
    });
    let where_ = match &file {
        Some(p) => format!("The new key is now in {p}."),
        None => "GATEHOUSE_MASTER_KEY still holds the old key: set it to the new key on every node before it next restarts (running servers already use the new key).".to_owned(),
    };
    let text = format!(
        "Master key rotated to key {}: {total} values re-sealed, {} found under the new key already.\n{where_}\n",
        rotated.key_id, rotated.already
    );
    Ok(Output::with_text(value, text))
}

/// `gatehouse staging reset` (D33): the fixture restored now, atomically.
pub async fn staging(app: &App, cmd: StagingCommand) -> anyhow::Result<Output> {
    match cmd {
        StagingCommand::Reset => {
            let n = app.reset_staging(&Origin::operator()).await.map_err(msg)?;
            Ok(Output::new(json!({ "ok": true, "organizations": n })))
        }
    }
}
