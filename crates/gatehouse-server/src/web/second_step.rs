//! D56: the second step of a sign-in on Gatehouse's own pages (D26, and the
//! dashboard's, D48 revised): after a right password, the person's second
//! factor (a TOTP code or a recovery code) or, under the organization's
//! policy, the enrolment step (skippable until the deadline); and the
//! step-up of a browser session that an authorization asks more of.
//!
//! Between the password and the code the browser holds the pending sign-in
//! sealed in a cookie (`gatehouse_auth::second_step`); the attempt's wrong
//! codes are counted in storage, so a replayed cookie gains nothing. The
//! forms carry the authorization request, like the sign-in form, so the
//! step ends where the password would have: consent or the redirect, or
//! the dashboard's code.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use gatehouse_app::Session;
use gatehouse_app::mfa::SecondStepError;
use gatehouse_app::passkeys::PasskeySignInError;
use gatehouse_auth::dashboard;
use gatehouse_auth::second_step::{PENDING_TTL_SECS, PendingSignIn};
use gatehouse_domain::mfa::SecondStep;
use gatehouse_domain::{OrgId, Timestamp, User};
use minijinja::{Value, context};

use crate::api::oauth_wire::AuthorizeParameters;
use crate::http::form::Form;
use crate::state::AppState;
use crate::web::authorize::{self, SignInRequest};
use crate::web::pages::{self, Cookies};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/oauth/authorize/second-factor", post(second_factor))
        .route("/oauth/authorize/enrol", post(enrol))
        .route("/oauth/authorize/skip", post(skip))
        .route("/oauth/authorize/passkey", post(passkey))
}

/// D26's wording: a wrong code and a paused second step read the same.
const CODE_FAILED: &str = "That code is not right, or the second step is paused for a while after too many wrong codes. A recovery code still works.";
const ATTEMPT_ENDED: &str =
    "Too many wrong codes for this sign-in. Sign in again with your password.";
const EXPIRED: &str = "This sign-in took too long. Sign in again with your password.";
const PASSKEY_FAILED: &str =
    "That passkey did not confirm the sign-in. Try again, or use another of your factors.";
const PASSKEY_ONLY: &str = "This application asks for a passkey: confirm the sign-in with one.";

fn pending_cookie(st: &AppState) -> &'static str {
    Cookies::of(st).second_step()
}

/// The client's name and its organization's, for the pages.
async fn names(st: &AppState, p: &AuthorizeParameters, org: &OrgId) -> (String, String) {
    let org_name = st.app.org_name(org).await.unwrap_or_default();
    if dashboard::is_dashboard(p.to_params().client_id.as_deref()) {
        return ("the Gatehouse dashboard".into(), org_name);
    }
    let client = match st.app.check_authorize(&p.to_params()).await {
        Ok(req) => req.client.name,
        Err(_) => String::new(),
    };
    (client, org_name)
}

/// Starts the second step (`session`: a step-up of it) and sets the
/// pending sign-in's cookie.
#[allow(clippy::too_many_arguments)]
pub(super) async fn begin(
    st: &AppState,
    headers: &HeaderMap,
    p: &AuthorizeParameters,
    org: &OrgId,
    user: &User,
    session: Option<&Session>,
    step: SecondStep,
    passkey_only: bool,
) -> Response {
    let Some(auth) = st.app.auth() else {
        return authorize::unavailable(st);
    };
    let mut pending = PendingSignIn::new(org, &user.id, session.map(|s| &s.id));
    pending.passkey_only = passkey_only;
    st.app
        .note_enrolment_step(org, &user.id, step, session.is_some())
        .await;
    let mut res = match step {
        SecondStep::Enrol { skippable_until } => match st.app.begin_totp(org, user).await {
            Ok(e) => enrol_page(st, headers, p, org, &e, skippable_until, None).await,
            Err(e) => {
                tracing::error!(cause = %e, "starting an enrolment failed");
                return authorize::unavailable(st);
            }
        },
        SecondStep::Code | SecondStep::Done => {
            code_page(st, headers, p, org, user, passkey_only, None).await
        }
    };
    pages::set_cookie(
        st,
        &mut res,
        pending_cookie(st),
        &auth.seal_pending(&pending),
        Some(PENDING_TTL_SECS),
    );
    res
}

/// The second step's page: a code, and a passkey when the person has one
/// (`passkey_only`: a step-up to `phr`, the passkey alone).
async fn code_page(
    st: &AppState,
    headers: &HeaderMap,
    p: &AuthorizeParameters,
    org: &OrgId,
    user: &User,
    passkey_only: bool,
    error: Option<&str>,
) -> Response {
    let (csrf, new) = pages::csrf_token(st, headers);
    let (client_name, org_name) = names(st, p, org).await;
    let here = crate::web::passkeys::offered_here(st, headers);
    // Storage unreadable: the code form, as before passkeys.
    let (passkey, codes) = match st.app.second_step_offer(org, &user.id, here).await {
        Ok(o) => (
            o.passkey.as_ref().map(crate::web::passkeys::offer_view),
            o.codes,
        ),
        Err(e) => {
            tracing::error!(cause = %e, "reading the second step's factors failed");
            (None, true)
        }
    };
    let status = if error.is_some() {
        StatusCode::UNAUTHORIZED
    } else {
        StatusCode::OK
    };
    let res = st.templates.page_with_status(
        status,
        "second_step.html",
        context! {
            client_name, org_name, email => user.email.as_str(), csrf => &csrf,
            params => p.hidden(), error, passkey, codes => codes && !passkey_only,
            passkey_only,
        },
    );
    pages::with_csrf(st, res, &csrf, new)
}

async fn enrol_page(
    st: &AppState,
    headers: &HeaderMap,
    p: &AuthorizeParameters,
    org: &OrgId,
    e: &gatehouse_app::mfa::TotpEnrolment,
    skippable_until: Option<Timestamp>,
    error: Option<&str>,
) -> Response {
    let (csrf, new) = pages::csrf_token(st, headers);
    let (client_name, org_name) = names(st, p, org).await;
    let days_left = skippable_until.map(|until| {
        gatehouse_domain::mfa::days_left(until, Timestamp::now(), st.app.mfa_grace_day_secs())
    });
    let qr = crate::web::qr::svg_of(&e.uri).unwrap_or_default();
    let status = if error.is_some() {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::OK
    };
    let res = st.templates.page_with_status(
        status,
        "enrol.html",
        context! {
            client_name, org_name, csrf => &csrf, params => p.hidden(),
            qr => Value::from_safe_string(qr), secret => &e.secret_base32,
            enrolment => &e.sealed, days_left, error,
        },
    );
    pages::with_csrf(st, res, &csrf, new)
}

/// What the three forms share: the form, its CSRF check, the pending
/// sign-in of the cookie and its person.
struct Step {
    headers: HeaderMap,
    form: Form,
    p: AuthorizeParameters,
    pending: PendingSignIn,
    user: User,
}

async fn read_step(st: &AppState, request: Request) -> Result<Step, Box<Response>> {
    let (headers, form) = pages::checked_form(st, request, pages::FORM_EXPIRED).await?;
    let p = AuthorizeParameters::from_form(&form);
    let sealed = pages::cookie(&headers, pending_cookie(st)).unwrap_or_default();
    let pending = st.app.auth().and_then(|a| a.open_pending(&sealed));
    let Some(pending) = pending else {
        return Err(Box::new(sign_in_again(st, &headers, &p, EXPIRED).await));
    };
    let user = match st.app.get_user(&pending.org, &pending.user).await {
        Ok(u) if u.status == gatehouse_domain::UserStatus::Active => u,
        _ => return Err(Box::new(sign_in_again(st, &headers, &p, EXPIRED).await)),
    };
    Ok(Step {
        headers,
        form,
        p,
        pending,
        user,
    })
}

/// Back to the password, with `why`; the pending sign-in is forgotten.
async fn sign_in_again(
    st: &AppState,
    headers: &HeaderMap,
    p: &AuthorizeParameters,
    why: &str,
) -> Response {
    let mut res = match SignInRequest::check(st, p).await {
        Ok(req) => req.login_page(st, p, headers, Some(why)).await,
        Err(refused) => refused,
    };
    pages::set_cookie(st, &mut res, pending_cookie(st), "", Some(0));
    res
}

/// The sign-in (or step-up) completed with `amr`: the session begins (or
/// is raised), then what the password would have led to.
async fn complete(
    st: &AppState,
    step: &Step,
    browser: &pages::Browser,
    amr: Option<&[String]>,
    then: Option<Response>,
    enrolled: bool,
) -> Response {
    let Step {
        headers,
        p,
        pending,
        user,
        ..
    } = step;
    let req = match SignInRequest::check(st, p).await {
        Ok(req) => req,
        Err(refused) => return refused,
    };
    // The password was checked in the client's organization (D26).
    if req.org().is_some_and(|org| org != &pending.org) {
        return sign_in_again(st, headers, p, EXPIRED).await;
    }
    let client = req.client_id();
    // A step-up raises the session it was asked for; else a new one.
    let (session, cookie) = match &pending.session {
        Some(id) => {
            let current = match pages::session_cookie(st, headers) {
                Some(c) => st.app.session(&c).await.ok().flatten(),
                None => None,
            };
            let Some(current) = current.filter(|s| &s.id == id && s.user == user.id) else {
                return sign_in_again(st, headers, p, EXPIRED).await;
            };
            // A skipped enrolment authenticates nothing: the session stays
            // as it was (and the next authorization asks again).
            let Some(amr) = amr else {
                let mut res = req.signed_in(st, p, headers, user, &current).await;
                pages::set_cookie(st, &mut res, pending_cookie(st), "", Some(0));
                return res;
            };
            // An enrolment proves no factor held before: it raises `amr`
            // but leaves `auth_time` (the account page's freshness and
            // `max_age` count from the last real authentication).
            match st.app.step_up(&current, amr, !enrolled).await {
                Ok(s) => (s, None),
                Err(e) => {
                    tracing::error!(cause = %e, "a step-up failed on storage");
                    return authorize::unavailable(st);
                }
            }
        }
        None => {
            let created = st
                .app
                .create_session_with(
                    user,
                    &pending.org,
                    &client,
                    &browser.used,
                    browser.request.clone(),
                    amr.unwrap_or(&[]),
                )
                .await;
            match created {
                Ok((token, s)) => (s, Some(token)),
                Err(e) => {
                    tracing::error!(cause = %e, "creating a session failed");
                    return authorize::unavailable(st);
                }
            }
        }
    };
    let mut res = match then {
        Some(r) => r,
        None => req.signed_in(st, p, headers, user, &session).await,
    };
    if let Some(token) = cookie {
        let age = st.app.session_limits().cookie_max_age();
        pages::set_session_cookie(st, &mut res, &token, Some(age));
    }
    pages::set_cookie(st, &mut res, pending_cookie(st), "", Some(0));
    res
}

/// What the second step adds to (D56: a step-up asks only for what is
/// missing): a step-up's session's `amr`, else a password's.
async fn amr_before(st: &AppState, step: &Step) -> Vec<String> {
    if let Some(id) = &step.pending.session
        && let Some(cookie) = pages::session_cookie(st, &step.headers)
        && let Ok(Some(session)) = st.app.session(&cookie).await
        && &session.id == id
        && session.user == step.user.id
    {
        return session.amr;
    }
    gatehouse_domain::mfa::amr_password()
}

/// `POST /oauth/authorize/second-factor`: a TOTP or recovery code.
async fn second_factor(
    State(st): State<AppState>,
    browser: pages::Browser,
    ctx: crate::http::middleware::RequestCtx,
    request: Request,
) -> Response {
    let step = match read_step(&st, request).await {
        Ok(s) => s,
        Err(res) => return *res,
    };
    if step.pending.passkey_only {
        return code_page(
            &st,
            &step.headers,
            &step.p,
            &step.pending.org,
            &step.user,
            true,
            Some(PASSKEY_ONLY),
        )
        .await;
    }
    let code = step.form.value("code").unwrap_or("");
    let amr_before = amr_before(&st, &step).await;
    let passed = st
        .app
        .pass_second_step(
            &step.pending.org,
            &step.user,
            &step.pending.attempt,
            code,
            &amr_before,
            Some(&ctx.request_ref(None)),
        )
        .await;
    match passed {
        Ok(passed) => {
            // A recovery code used: its e-mail tells the person, and the
            // account page warns when few are left (D56); the sign-in goes
            // on where the request leads.
            complete(&st, &step, &browser, Some(&passed.amr), None, false).await
        }
        Err(SecondStepError::Wrong | SecondStepError::Blocked) => {
            code_page(
                &st,
                &step.headers,
                &step.p,
                &step.pending.org,
                &step.user,
                false,
                Some(CODE_FAILED),
            )
            .await
        }
        Err(SecondStepError::AttemptEnded) => {
            sign_in_again(&st, &step.headers, &step.p, ATTEMPT_ENDED).await
        }
        Err(SecondStepError::Failed(e)) => {
            tracing::error!(cause = %e, "the second step failed on storage");
            authorize::unavailable(&st)
        }
    }
}

/// `POST /oauth/authorize/passkey`: the second step (or a step-up) with a
/// passkey, with or without user verification (D56).
async fn passkey(
    State(st): State<AppState>,
    browser: pages::Browser,
    request: Request,
) -> Response {
    let step = match read_step(&st, request).await {
        Ok(s) => s,
        Err(res) => return *res,
    };
    let sealed = step.form.value("assertion").unwrap_or("");
    let answer = step.form.value("answer").unwrap_or("");
    let amr_before = amr_before(&st, &step).await;
    let passed = st
        .app
        .pass_passkey_step(
            &step.pending.org,
            &step.user,
            &step.pending.attempt,
            sealed,
            answer,
            &amr_before,
        )
        .await;
    let why = match passed {
        Ok(amr) => return complete(&st, &step, &browser, Some(&amr), None, false).await,
        Err(PasskeySignInError::AttemptEnded) => {
            return sign_in_again(&st, &step.headers, &step.p, ATTEMPT_ENDED).await;
        }
        Err(PasskeySignInError::SignCount) => crate::web::passkeys::SIGN_COUNT,
        Err(PasskeySignInError::Failed(e)) => {
            tracing::error!(cause = %e, "a passkey step failed on storage");
            return authorize::unavailable(&st);
        }
        Err(_) => PASSKEY_FAILED,
    };
    code_page(
        &st,
        &step.headers,
        &step.p,
        &step.pending.org,
        &step.user,
        step.pending.passkey_only,
        Some(why),
    )
    .await
}

/// `POST /oauth/authorize/enrol`: the enrolment step's confirming code; the
/// sign-in completes with the new factor, then the recovery codes are
/// shown once.
async fn enrol(State(st): State<AppState>, browser: pages::Browser, request: Request) -> Response {
    let step = match read_step(&st, request).await {
        Ok(s) => s,
        Err(res) => return *res,
    };
    let sealed = step.form.value("enrolment").unwrap_or("");
    let code = step.form.value("code").unwrap_or("");
    let origin = gatehouse_domain::event::Origin {
        actor: gatehouse_domain::event::Actor::User {
            user: step.user.id.clone(),
            client: None,
        },
        request: browser.request.clone(),
    };
    let org = step.pending.org.clone();
    // Only a person facing the enrolment step enrols here: one with a
    // factor gives its code (an enrolment cannot replace the second step).
    match st.app.next_step(&org, &step.user).await {
        Ok(SecondStep::Enrol { .. }) => {}
        Ok(_) => return sign_in_again(&st, &step.headers, &step.p, EXPIRED).await,
        Err(e) => {
            tracing::error!(cause = %e, "reading the second step failed");
            return authorize::unavailable(&st);
        }
    }
    match st
        .app
        .confirm_totp(&org, &step.user, sealed, code, &origin)
        .await
    {
        Ok(_) => {}
        Err(gatehouse_app::mfa::MfaError::WrongCode) => {
            let again = st.app.reopen_totp(&org, &step.user, sealed).await;
            let Ok(e) = again else {
                return sign_in_again(&st, &step.headers, &step.p, EXPIRED).await;
            };
            let skippable = match st.app.next_step(&org, &step.user).await {
                Ok(SecondStep::Enrol { skippable_until }) => skippable_until,
                _ => None,
            };
            return enrol_page(
                &st,
                &step.headers,
                &step.p,
                &org,
                &e,
                skippable,
                Some("That code is not right. Enter the code the app shows now."),
            )
            .await;
        }
        Err(gatehouse_app::mfa::MfaError::Expired) => {
            return sign_in_again(&st, &step.headers, &step.p, EXPIRED).await;
        }
        Err(e) => {
            tracing::error!(cause = %e, "confirming an enrolment failed");
            return authorize::unavailable(&st);
        }
    }
    let codes = match st
        .app
        .regenerate_recovery_codes(&org, &step.user, &origin)
        .await
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(cause = %e, "making recovery codes failed");
            return authorize::unavailable(&st);
        }
    };
    // The codes page leads back to the request, which the new session
    // (with `mfa`) now completes.
    let continue_to = format!("/oauth/authorize?{}", step.p.query());
    let page = recovery_codes_page(&st, &codes, &continue_to);
    let amr = gatehouse_domain::mfa::amr_with_otp(&gatehouse_domain::mfa::amr_password());
    complete(&st, &step, &browser, Some(&amr), Some(page), true).await
}

/// The recovery codes, shown once with a download (D56).
pub(crate) fn recovery_codes_page(st: &AppState, codes: &[String], continue_to: &str) -> Response {
    let text = codes.join("\r\n") + "\r\n";
    st.templates.page(
        "recovery_codes.html",
        context! { codes => codes.to_vec(), codes_text => text, continue_to },
    )
}

/// `POST /oauth/authorize/skip`: the enrolment step skipped before the
/// deadline; the sign-in completes with the password alone.
async fn skip(State(st): State<AppState>, browser: pages::Browser, request: Request) -> Response {
    let step = match read_step(&st, request).await {
        Ok(s) => s,
        Err(res) => return *res,
    };
    match st.app.next_step(&step.pending.org, &step.user).await {
        Ok(SecondStep::Enrol {
            skippable_until: Some(_),
        }) => {}
        Ok(SecondStep::Enrol {
            skippable_until: None,
        }) => {
            return sign_in_again(
                &st,
                &step.headers,
                &step.p,
                "Setting up a second factor is now required. Sign in again to set it up.",
            )
            .await;
        }
        // A person with a factor gives its code: nothing else is skipped.
        Ok(_) => return sign_in_again(&st, &step.headers, &step.p, EXPIRED).await,
        Err(e) => {
            tracing::error!(cause = %e, "reading the second step failed");
            return authorize::unavailable(&st);
        }
    }
    complete(&st, &step, &browser, None, None, false).await
}
