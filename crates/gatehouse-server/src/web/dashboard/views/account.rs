//! The account page at `/account/security` (D57, D19 continued, D29
//! continued: every role has it): the person's sessions, ending one or all
//! others, and the password change. Server-rendered like the dashboard,
//! with its sign-in; it needs a sign-in within the last five minutes, and
//! asks for a fresh one otherwise (D56's self-service rule).
//!
//! The sessions are read and ended through `/v1/me/sessions` with the
//! person's token (the dashboard's token acts in its browser session, so
//! the API marks it `current`). The password change has no API: it needs
//! the current password, which only this page asks for, so it calls the
//! application layer's use case directly.

use axum::Router;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use axum::routing::{get, post};
use gatehouse_app::passkeys::PasskeyRegistrationError;
use gatehouse_app::sessions::PasswordChangeError;
use gatehouse_domain::{SessionId, Timestamp};
use minijinja::{Value, context};
use serde_json::Value as Json;

use super::Peer;
use super::fields::{page_status, query_value, safe_id};
use crate::state::AppState;
use crate::web::dashboard::api::Reply;
use crate::web::dashboard::{Signed, read_form, render, see_other, signed};
use crate::web::pages;

/// D56: the page needs a sign-in at most this old.
const FRESH_SIGN_IN_SECS: i64 = 300;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/account/security", get(security))
        .route("/account/security/sessions/others", post(end_others))
        .route("/account/security/sessions/{id}/end", post(end_one))
        .route("/account/security/password", post(change_password))
        .route("/account/security/totp", get(totp_page).post(confirm_totp))
        .route("/account/security/factors/{id}/remove", post(remove_factor))
        .route("/account/security/recovery-codes", post(new_codes))
        .route("/account/security/passkeys", post(add_passkey))
}

/// The way to a (fresh) sign-in that comes back here.
fn reauth(fresh: bool) -> Response {
    see_other(if fresh {
        "/dashboard/signin?next=account&fresh=1"
    } else {
        "/dashboard/signin?next=account"
    })
}

/// The signed-in person, when their Gatehouse sign-in in this browser is
/// at most five minutes old; the way to a new sign-in otherwise.
async fn fresh(st: &AppState, headers: &HeaderMap, peer: Peer) -> Result<Signed, Box<Response>> {
    let signed = match signed(st, headers, peer.0).await {
        Ok(s) => s,
        Err(res) if res.status() == StatusCode::SEE_OTHER => return Err(Box::new(reauth(false))),
        Err(res) => return Err(res),
    };
    let session = match pages::session_cookie(st, headers) {
        Some(cookie) => st.app.session(&cookie).await.ok().flatten(),
        None => None,
    };
    let now = Timestamp::now();
    let recent = session.is_some_and(|s| {
        signed.grant.sid.as_deref() == Some(s.id.as_str())
            // D56: the latest authentication (a step-up counts).
            && now.millis() - s.auth_time.millis() <= FRESH_SIGN_IN_SECS * 1000
    });
    if recent {
        Ok(signed)
    } else {
        Err(Box::new(reauth(true)))
    }
}

macro_rules! fresh_or_return {
    ($st:expr, $headers:expr, $peer:expr) => {
        match fresh(&$st, &$headers, $peer).await {
            Ok(s) => s,
            Err(res) => return *res,
        }
    };
}

/// A session as the page lists it.
fn session_view(s: &Json) -> Value {
    let apps: Vec<String> = s["applications"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    context! {
        id => s["id"].as_str().unwrap_or(""),
        created_at => s["created_at"].as_str().unwrap_or(""),
        last_seen_at => s["last_seen_at"].as_str().unwrap_or(""),
        ip => s["ip"].as_str(),
        user_agent => s["user_agent"].as_str(),
        applications => apps,
        current => s["current"].as_bool().unwrap_or(false),
    }
}

/// The words of a `done=` notice of this page.
fn account_notice(uri: &Uri) -> Option<&'static str> {
    match query_value(uri, "done").as_deref() {
        Some("ended") => Some(
            "The session was ended: that browser is signed out and its applications must sign in again.",
        ),
        Some("others") => Some("Every other session was ended; this one stays signed in."),
        Some("password") => Some(
            "Your password was changed. Every other session was ended, and you were sent an e-mail.",
        ),
        Some("totp") => Some(
            "The authenticator app was added: sign-ins now ask for its code. You were sent an e-mail.",
        ),
        Some("removed") => Some("The second factor was removed. You were sent an e-mail."),
        Some("codes") => Some("Your new recovery codes replace the earlier ones."),
        Some("passkey") => Some(
            "The passkey was added: it signs you in without a password, or confirms a sign-in after it. You were sent an e-mail.",
        ),
        _ => None,
    }
}

/// What a refused form shows next to its field: the password change's,
/// or why a passkey was not added.
#[derive(Default)]
struct FormProblems {
    current: Option<String>,
    new: Option<String>,
    again: Option<String>,
    passkey: Option<&'static str>,
}

async fn page(
    st: &AppState,
    headers: &HeaderMap,
    signed: &Signed,
    status: StatusCode,
    notice: Option<&str>,
    failed: Option<Reply>,
    password: FormProblems,
) -> Response {
    let reply = signed
        .api(st, Method::GET, "/me/sessions?limit=100", None)
        .await;
    // D56: the factors, as `GET /v1/me/mfa` lists them.
    let mfa = signed.api(st, Method::GET, "/me/mfa", None).await;
    let mfa_items: Vec<Json> = mfa.data().as_array().cloned().unwrap_or_default();
    let factors: Vec<Value> = mfa_items
        .iter()
        .filter(|i| i["type"] != "recovery_codes")
        .map(|f| {
            context! {
                id => f["id"].as_str().unwrap_or(""),
                kind => f["type"].as_str().unwrap_or(""),
                name => f["name"].as_str().unwrap_or(""),
                created_at => f["created_at"].as_str().unwrap_or(""),
                last_used_at => f["last_used_at"].as_str(),
            }
        })
        .collect();
    let recovery_left = mfa_items
        .iter()
        .find(|i| i["type"] == "recovery_codes")
        .and_then(|i| i["remaining"].as_u64());
    // D56: a passkey offered while there is room and passkeys work here.
    let (passkey, passkey_note) = match person(st, signed).await {
        Ok(_) if !crate::web::passkeys::offered_here(st, headers) => (
            None,
            Some("Passkeys are offered at http://localhost in the mock."),
        ),
        Ok(user) => match st.app.begin_passkey(&signed.grant.org, &user).await {
            Ok(offer) => (Some(crate::web::passkeys::offer_view(&offer)), None),
            Err(PasskeyRegistrationError::TooMany) => (
                None,
                Some(
                    "You have ten passkeys, the most an account can have. Remove one to add another.",
                ),
            ),
            Err(PasskeyRegistrationError::Unavailable(_)) => (
                None,
                Some(
                    "Passkeys are not available at this address (it is an IP address, not a domain name).",
                ),
            ),
            Err(e) => {
                tracing::error!(cause = %e, "account: offering a passkey failed");
                (None, None)
            }
        },
        Err(_) => (None, None),
    };
    let has_totp = factors
        .iter()
        .any(|f| f.get_attr("kind").is_ok_and(|k| k.as_str() == Some("totp")));
    let list_problem = (!reply.ok()).then(|| reply.problem());
    let sessions: Vec<Value> = reply
        .data()
        .as_array()
        .map(|a| a.iter().map(session_view).collect())
        .unwrap_or_default();
    let others = sessions
        .iter()
        .filter(|s| !s.get_attr("current").is_ok_and(|c| c.is_true()))
        .count();
    let status = match &failed {
        Some(r) => page_status(r),
        None if !reply.ok() => page_status(&reply),
        None => status,
    };
    let problem = failed.map(|r| r.problem());
    render(
        st,
        headers,
        signed,
        status,
        "account_security.html",
        "account",
        context! {
            sessions, others, list_problem, problem, notice,
            factors, has_totp, recovery_left, passkey, passkey_note,
            passkey_error => password.passkey,
            recovery_low => recovery_left.is_some_and(|n| n <= gatehouse_domain::mfa::RECOVERY_CODES_LOW as u64),
            mfa_problem => (!mfa.ok()).then(|| mfa.problem()),
            password => context! { current => password.current, new => password.new, again => password.again },
        },
    )
    .await
}

/// The page again with the API's refusal of a session action.
async fn refused(st: &AppState, headers: &HeaderMap, signed: &Signed, reply: Reply) -> Response {
    page(
        st,
        headers,
        signed,
        StatusCode::OK,
        None,
        Some(reply),
        FormProblems::default(),
    )
    .await
}

async fn security(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let signed = fresh_or_return!(st, headers, ConnectInfo(peer));
    page(
        &st,
        &headers,
        &signed,
        StatusCode::OK,
        account_notice(&uri),
        None,
        FormProblems::default(),
    )
    .await
}

async fn end_one(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let (headers, _form) = match read_form(&st, req).await {
        Ok(f) => f,
        Err(res) => return *res,
    };
    let signed = fresh_or_return!(st, headers, ConnectInfo(peer));
    let Some(id) = safe_id(&id).and_then(SessionId::parse) else {
        return super::not_found(&st);
    };
    let reply = signed
        .api(&st, Method::DELETE, &format!("/me/sessions/{id}"), None)
        .await;
    if !reply.ok() {
        return refused(&st, &headers, &signed, reply).await;
    }
    // Ending this very session signs this browser out: the sign-in again.
    if signed.grant.sid.as_deref() == Some(id.as_str()) {
        return reauth(false);
    }
    signed.redirect(&st, "/account/security?done=ended")
}

async fn end_others(State(st): State<AppState>, ConnectInfo(peer): Peer, req: Request) -> Response {
    let (headers, _form) = match read_form(&st, req).await {
        Ok(f) => f,
        Err(res) => return *res,
    };
    let signed = fresh_or_return!(st, headers, ConnectInfo(peer));
    let reply = signed
        .api(&st, Method::POST, "/me/sessions/revoke-others", None)
        .await;
    if !reply.ok() {
        return refused(&st, &headers, &signed, reply).await;
    }
    signed.redirect(&st, "/account/security?done=others")
}

async fn change_password(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    browser: pages::Browser,
    req: Request,
) -> Response {
    let (headers, form) = match read_form(&st, req).await {
        Ok(f) => f,
        Err(res) => return *res,
    };
    let signed = fresh_or_return!(st, headers, ConnectInfo(peer));
    let org = &signed.grant.org;
    let Some(kept) = signed.grant.sid.as_deref().and_then(SessionId::parse) else {
        return reauth(true);
    };
    let user = match person(&st, &signed).await {
        Ok(u) => u,
        Err(res) => return *res,
    };
    let outcome = st
        .app
        .change_password(
            org,
            &user,
            &kept,
            form.value("current_password").unwrap_or(""),
            form.value("new_password").unwrap_or(""),
            form.value("new_password_again").unwrap_or(""),
            &browser.used.ip,
            browser.request,
        )
        .await;
    let mut problems = FormProblems::default();
    match outcome {
        Ok(_) => return signed.redirect(&st, "/account/security?done=password"),
        Err(PasswordChangeError::Current) => {
            problems.current = Some(
                "That is not your current password (or sign-in is paused for a while after too many attempts)."
                    .into(),
            );
        }
        Err(PasswordChangeError::Rule(rule)) => {
            problems.new = Some(format!("The new password {rule}."));
        }
        Err(PasswordChangeError::Mismatch) => {
            problems.again = Some("The two new passwords differ.".into());
        }
        Err(PasswordChangeError::Failed(e)) => {
            tracing::error!(cause = %e, "account: changing the password failed");
            return unavailable(&st, "Your password was not changed. Try again in a moment.");
        }
    }
    page(
        &st,
        &headers,
        &signed,
        StatusCode::UNPROCESSABLE_ENTITY,
        None,
        None,
        problems,
    )
    .await
}

/// The account page's answer when storage cannot be reached: 503 with
/// `what` did not happen.
fn unavailable(st: &AppState, what: &str) -> Response {
    crate::web::dashboard::message(
        st,
        StatusCode::SERVICE_UNAVAILABLE,
        "Try again in a moment",
        what,
    )
}

/// The person of the page, read fresh (their role and status now).
async fn person(st: &AppState, signed: &Signed) -> Result<gatehouse_domain::User, Box<Response>> {
    st.app
        .get_user(&signed.grant.org, &signed.grant.user)
        .await
        .map_err(|e| {
            tracing::error!(cause = %e, "account: reading the person failed");
            Box::new(unavailable(st, "The service is temporarily unavailable."))
        })
}

/// Who a change on this page is made by (D54): the person, through the
/// dashboard.
fn origin_of(signed: &Signed, browser: &pages::Browser) -> gatehouse_domain::event::Origin {
    gatehouse_domain::event::Origin {
        actor: gatehouse_domain::event::Actor::User {
            user: signed.grant.user.clone(),
            client: Some(gatehouse_auth::dashboard::dashboard_client_id()),
        },
        request: browser.request.clone(),
    }
}

/// The TOTP enrolment (D56): the QR code, the key, and the confirming form.
async fn totp_view(
    st: &AppState,
    headers: &HeaderMap,
    signed: &Signed,
    e: &gatehouse_app::mfa::TotpEnrolment,
    error: Option<&str>,
) -> Response {
    let qr = crate::web::qr::svg_of(&e.uri).unwrap_or_default();
    let status = if error.is_some() {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::OK
    };
    render(
        st,
        headers,
        signed,
        status,
        "account_totp.html",
        "account",
        context! {
            qr => Value::from_safe_string(qr), secret => &e.secret_base32,
            enrolment => &e.sealed, error,
        },
    )
    .await
}

async fn totp_page(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
) -> Response {
    let signed = fresh_or_return!(st, headers, ConnectInfo(peer));
    let user = match person(&st, &signed).await {
        Ok(u) => u,
        Err(res) => return *res,
    };
    match st.app.begin_totp(&signed.grant.org, &user).await {
        Ok(e) => totp_view(&st, &headers, &signed, &e, None).await,
        Err(e) => {
            tracing::error!(cause = %e, "account: starting an enrolment failed");
            unavailable(&st, "The service is temporarily unavailable.")
        }
    }
}

async fn confirm_totp(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    browser: pages::Browser,
    req: Request,
) -> Response {
    let (headers, form) = match read_form(&st, req).await {
        Ok(f) => f,
        Err(res) => return *res,
    };
    let signed = fresh_or_return!(st, headers, ConnectInfo(peer));
    let user = match person(&st, &signed).await {
        Ok(u) => u,
        Err(res) => return *res,
    };
    let org = signed.grant.org.clone();
    let sealed = form.value("enrolment").unwrap_or("");
    let origin = origin_of(&signed, &browser);
    use gatehouse_app::mfa::MfaError;
    match st
        .app
        .confirm_totp(
            &org,
            &user,
            sealed,
            form.value("code").unwrap_or(""),
            &origin,
        )
        .await
    {
        Ok(_) => {}
        Err(MfaError::WrongCode) => {
            return match st.app.reopen_totp(&org, &user, sealed).await {
                Ok(e) => {
                    totp_view(
                        &st,
                        &headers,
                        &signed,
                        &e,
                        Some("That code is not right. Enter the 6-digit code the app shows now."),
                    )
                    .await
                }
                Err(_) => signed.redirect(&st, "/account/security/totp"),
            };
        }
        Err(MfaError::Expired) => return signed.redirect(&st, "/account/security/totp"),
        Err(e) => {
            tracing::error!(cause = %e, "account: confirming an enrolment failed");
            return unavailable(
                &st,
                "The authenticator app was not added. Try again in a moment.",
            );
        }
    }
    first_factor_codes(&st, &signed, &user, &origin, "totp").await
}

/// After a factor was added (`done` names it for the notice): the first
/// factor comes with recovery codes, shown once (D56); else back to the
/// page.
async fn first_factor_codes(
    st: &AppState,
    signed: &Signed,
    user: &gatehouse_domain::User,
    origin: &gatehouse_domain::event::Origin,
    done: &str,
) -> Response {
    let back = format!("/account/security?done={done}");
    let has_codes = st
        .app
        .mfa_of(&signed.grant.org, &user.id)
        .await
        .is_ok_and(|f| f.recovery_remaining.is_some());
    if has_codes {
        return signed.redirect(st, &back);
    }
    match st
        .app
        .regenerate_recovery_codes(&signed.grant.org, user, origin)
        .await
    {
        Ok(codes) => crate::web::second_step::recovery_codes_page(st, &codes, &back),
        Err(e) => {
            tracing::error!(cause = %e, "account: making recovery codes failed");
            signed.redirect(st, &back)
        }
    }
}

async fn remove_factor(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    browser: pages::Browser,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let (headers, _form) = match read_form(&st, req).await {
        Ok(f) => f,
        Err(res) => return *res,
    };
    let signed = fresh_or_return!(st, headers, ConnectInfo(peer));
    let Some(id) = safe_id(&id).and_then(gatehouse_domain::MfaId::parse) else {
        return super::not_found(&st);
    };
    let user = match person(&st, &signed).await {
        Ok(u) => u,
        Err(res) => return *res,
    };
    let origin = origin_of(&signed, &browser);
    use gatehouse_app::mfa::MfaError;
    match st
        .app
        .remove_factor(&signed.grant.org, &user, &id, &origin)
        .await
    {
        Ok(()) => signed.redirect(&st, "/account/security?done=removed"),
        Err(MfaError::NotFound) => super::not_found(&st),
        Err(MfaError::LastFactor) => {
            page(
                &st,
                &headers,
                &signed,
                StatusCode::CONFLICT,
                Some("Your organization requires a second factor, so your last one stays. Add another first, or ask an admin to reset it."),
                None,
                FormProblems::default(),
            )
            .await
        }
        Err(e) => {
            tracing::error!(cause = %e, "account: removing a factor failed");
            unavailable(&st, "The factor was not removed. Try again in a moment.")
        }
    }
}

async fn new_codes(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    browser: pages::Browser,
    req: Request,
) -> Response {
    let (headers, _form) = match read_form(&st, req).await {
        Ok(f) => f,
        Err(res) => return *res,
    };
    let signed = fresh_or_return!(st, headers, ConnectInfo(peer));
    let user = match person(&st, &signed).await {
        Ok(u) => u,
        Err(res) => return *res,
    };
    let origin = origin_of(&signed, &browser);
    match st
        .app
        .regenerate_recovery_codes(&signed.grant.org, &user, &origin)
        .await
    {
        Ok(codes) => crate::web::second_step::recovery_codes_page(
            &st,
            &codes,
            "/account/security?done=codes",
        ),
        // No factor, no codes (D56): the page offers to add one.
        Err(gatehouse_app::mfa::MfaError::NoFactor) => signed.redirect(&st, "/account/security"),
        Err(e) => {
            tracing::error!(cause = %e, "account: making recovery codes failed");
            unavailable(
                &st,
                "No new recovery codes were made. Try again in a moment.",
            )
        }
    }
}

/// `POST /account/security/passkeys`: the browser's answer to a passkey
/// registration (D56), named by the person.
async fn add_passkey(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    browser: pages::Browser,
    req: Request,
) -> Response {
    let (headers, form) = match read_form(&st, req).await {
        Ok(f) => f,
        Err(res) => return *res,
    };
    let signed = fresh_or_return!(st, headers, ConnectInfo(peer));
    let user = match person(&st, &signed).await {
        Ok(u) => u,
        Err(res) => return *res,
    };
    let origin = origin_of(&signed, &browser);
    let added = st
        .app
        .finish_passkey(
            &signed.grant.org,
            &user,
            form.value("registration").unwrap_or(""),
            form.value("answer").unwrap_or(""),
            form.value("name").unwrap_or(""),
            &origin,
        )
        .await;
    let (status, why) = match added {
        Ok(_) => return first_factor_codes(&st, &signed, &user, &origin, "passkey").await,
        Err(PasskeyRegistrationError::TooMany) => (
            StatusCode::CONFLICT,
            "You have ten passkeys, the most an account can have. Remove one to add another.",
        ),
        Err(PasskeyRegistrationError::Duplicate) => (
            StatusCode::CONFLICT,
            "That passkey is on your account already.",
        ),
        Err(PasskeyRegistrationError::Failed(e)) => {
            tracing::error!(cause = %e, "account: adding a passkey failed");
            return unavailable(&st, "The passkey was not added. Try again in a moment.");
        }
        Err(_) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            "The passkey was not added: the request expired or the authenticator's answer did not check. Try again.",
        ),
    };
    page(
        &st,
        &headers,
        &signed,
        status,
        None,
        None,
        FormProblems {
            passkey: Some(why),
            ..FormProblems::default()
        },
    )
    .await
}
