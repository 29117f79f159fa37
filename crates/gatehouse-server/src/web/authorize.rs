//! `GET`/`POST /oauth/authorize` and its sign-in and consent pages (D26,
//! D29), with OpenID Connect's `prompt`, `max_age`, `login_hint` and
//! remembered consent (D49).

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use gatehouse_app::Session;
use gatehouse_auth::OAuthErrorKind;
use gatehouse_auth::dashboard::{self, DashboardRequest};
use gatehouse_auth::flows::{AuthorizeError, AuthorizeRequest, LoginError};
use gatehouse_domain::{Scope, User};
use minijinja::context;

use crate::api::oauth_wire::AuthorizeParameters;
use crate::state::AppState;
use crate::web::pages::{self, Cookies};
use crate::web::second_step;
use gatehouse_app::mfa::StepUp;
use gatehouse_domain::mfa::SecondStep;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/oauth/authorize", get(start).post(start_by_post))
        .route("/oauth/authorize/login", post(login))
        .route("/oauth/authorize/decision", post(decide))
        .route("/oauth/authorize/account", post(pick_account))
}

/// `redirect_uri` with `pairs` and the issuer (RFC 9207, D49) added to its
/// query.
pub(super) fn redirect_to(st: &AppState, uri: &str, pairs: &[(&str, &str)]) -> Response {
    let mut all: Vec<(&str, &str)> = pairs.to_vec();
    all.push(("iss", st.config.public_url.trim_end_matches('/')));
    let query = serde_urlencoded::to_string(&all).unwrap_or_default();
    let sep = if uri.contains('?') { '&' } else { '?' };
    let target = format!("{uri}{sep}{query}");
    let mut res = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(&target) {
        res.headers_mut().insert(header::LOCATION, v);
    }
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

pub(crate) fn refuse(st: &AppState, e: AuthorizeError) -> Response {
    match e {
        AuthorizeError::Page(m) => pages::message(
            st,
            StatusCode::BAD_REQUEST,
            "This sign-in link is not valid",
            &m,
        ),
        AuthorizeError::Redirect {
            redirect_uri,
            error,
            description,
            state,
        } => {
            let mut pairs = vec![
                ("error", error.as_str()),
                ("error_description", description.as_str()),
            ];
            if let Some(s) = &state {
                pairs.push(("state", s.as_str()));
            }
            redirect_to(st, &redirect_uri, &pairs)
        }
    }
}

pub(crate) fn unavailable(st: &AppState) -> Response {
    pages::message(
        st,
        StatusCode::SERVICE_UNAVAILABLE,
        "Try again in a moment",
        "The service is temporarily unavailable.",
    )
}

pub(super) async fn login_page(
    st: &AppState,
    req: &AuthorizeRequest,
    p: &AuthorizeParameters,
    headers: &HeaderMap,
    error: Option<&str>,
    email: &str,
) -> Response {
    let (csrf, new) = pages::csrf_token(st, headers);
    let status = if error.is_some() {
        StatusCode::UNAUTHORIZED
    } else {
        StatusCode::OK
    };
    // D49: `login_hint` pre-fills the e-mail.
    let email = if email.is_empty() {
        req.login_hint.as_deref().unwrap_or("")
    } else {
        email
    };
    let org_name = st.app.org_name(&req.client.org).await.unwrap_or_default();
    let res = st.templates.page_with_status(
        status,
        "login.html",
        context! {
            client_name => &req.client.name, org_name => org_name,
            client_id => req.client.id.as_str(), csrf => &csrf, forgot => true,
            params => p.hidden(), error => error, email => email,
            passkey => crate::web::passkeys::sign_in_offer(st, headers),
            // "Forgot your password?" leads back to this very request.
            return_to => format!("/oauth/authorize?{}", p.query()),
        },
    );
    pages::with_csrf(st, res, &csrf, new)
}

async fn consent_page(
    st: &AppState,
    req: &AuthorizeRequest,
    p: &AuthorizeParameters,
    headers: &HeaderMap,
    user: &User,
) -> Response {
    let granted = req.grantable(user.role);
    let scopes: Vec<_> = granted
        .iter()
        .map(|s: Scope| context! { name => s.as_str(), description => s.description() })
        .collect();
    let (csrf, new) = pages::csrf_token(st, headers);
    let org_name = st.app.org_name(&req.client.org).await.unwrap_or_default();
    // D49: "not you?" asks for a fresh sign-in to the same request.
    let switch = format!("/oauth/authorize?{}", p.with_prompt("login").query());
    let res = st.templates.page(
        "consent.html",
        context! {
            client_name => &req.client.name, org_name => org_name,
            user_email => user.email.as_str(), scopes, csrf => &csrf,
            params => p.hidden(), switch_account => switch,
        },
    );
    pages::with_csrf(st, res, &csrf, new)
}

/// Issues the code for `granted` and sends the person back to the client.
async fn grant(
    st: &AppState,
    req: &AuthorizeRequest,
    user: &User,
    session: &Session,
    granted: gatehouse_domain::ScopeSet,
) -> Response {
    match st.app.issue_code(req, user, session, granted).await {
        Ok(code) => {
            let mut pairs = vec![("code", code.as_str())];
            if let Some(s) = &req.state {
                pairs.push(("state", s.as_str()));
            }
            redirect_to(st, &req.redirect_uri, &pairs)
        }
        Err(e) => {
            tracing::error!(cause = %e, "issuing a code failed");
            refuse(
                st,
                req.error(OAuthErrorKind::Unavailable, "try again in a moment"),
            )
        }
    }
}

/// After the person is known: a remembered consent that covers the
/// request skips the page (D49); `prompt=none` never shows one.
pub(super) async fn after_sign_in(
    st: &AppState,
    req: &AuthorizeRequest,
    p: &AuthorizeParameters,
    headers: &HeaderMap,
    user: &User,
    session: &Session,
) -> Response {
    // D56: an Essential `acr` must be met by the session's level.
    let achieved = gatehouse_domain::mfa::Level::of_amr(&session.amr);
    if req.acr.essential_unsupported()
        || req
            .acr
            .essential_floor()
            .is_some_and(|floor| floor > achieved)
    {
        return unmet(st, req);
    }
    let granted = req.grantable(user.role);
    if granted.is_empty() {
        return refuse(
            st,
            req.error(
                OAuthErrorKind::InvalidScope,
                "none of the requested scopes can be granted to this user",
            ),
        );
    }
    match st.app.remembered_consent_covers(req, user, granted).await {
        Ok(true) => return grant(st, req, user, session, granted).await,
        Ok(false) => {}
        Err(e) => {
            tracing::error!(cause = %e, "reading a remembered consent failed");
            return refuse(
                st,
                req.error(OAuthErrorKind::Unavailable, "try again in a moment"),
            );
        }
    }
    if req.prompt.none {
        return refuse(
            st,
            req.error(
                OAuthErrorKind::ConsentRequired,
                "the person has to approve this application first",
            ),
        );
    }
    consent_page(st, req, p, headers, user).await
}

/// D56: an Essential `acr` that cannot be met; with `prompt=none`,
/// `login_required`.
fn unmet(st: &AppState, req: &AuthorizeRequest) -> Response {
    if req.prompt.none {
        return refuse(
            st,
            req.error(
                OAuthErrorKind::LoginRequired,
                "the requested authentication level needs the person to sign in",
            ),
        );
    }
    refuse(
        st,
        req.error(
            OAuthErrorKind::UnmetAuthenticationRequirements,
            "the person cannot reach the requested authentication level",
        ),
    )
}

/// D56: whether a signed-in `session` serves `req` as it is; else what
/// must come first: the second step (or the enrolment step) under the
/// organization's policy or for the level asked, `unmet_authentication_requirements`,
/// or `login_required` with `prompt=none`. With `prompt=none`, `acr_values`
/// is answered with the level reached.
async fn session_serves(
    st: &AppState,
    req: &AuthorizeRequest,
    p: &AuthorizeParameters,
    headers: &HeaderMap,
    user: &User,
    session: &Session,
) -> Option<Response> {
    let acr = if req.prompt.none {
        gatehouse_domain::mfa::AcrRequest {
            voluntary: Vec::new(),
            ..req.acr.clone()
        }
    } else {
        req.acr.clone()
    };
    match st.app.step_up_for(session, user, &acr).await {
        Ok(StepUp::Met) => None,
        Ok(StepUp::Unmet) => Some(unmet(st, req)),
        Ok(StepUp::Needed(_) | StepUp::Passkey) if req.prompt.none => Some(refuse(
            st,
            req.error(
                OAuthErrorKind::LoginRequired,
                "the person has to confirm the sign-in with a second factor",
            ),
        )),
        Ok(StepUp::Needed(step)) => Some(
            second_step::begin(
                st,
                headers,
                p,
                &req.client.org,
                user,
                Some(session),
                step,
                false,
            )
            .await,
        ),
        // D56: a step-up to `phr` asks for a passkey.
        Ok(StepUp::Passkey) => Some(
            second_step::begin(
                st,
                headers,
                p,
                &req.client.org,
                user,
                Some(session),
                SecondStep::Code,
                true,
            )
            .await,
        ),
        Err(e) => {
            tracing::error!(cause = %e, "reading the second step failed");
            Some(unavailable(st))
        }
    }
}

async fn session_user(
    st: &AppState,
    headers: &HeaderMap,
    req: &AuthorizeRequest,
    browser: &pages::Browser,
) -> Option<(User, Session)> {
    let cookie = pages::session_cookie(st, headers)?;
    st.app
        .session_user(&cookie, &req.client.org, &browser.used)
        .await
        .ok()
        .flatten()
}

/// An authorization request by GET or POST (D49).
async fn authorize(
    st: AppState,
    headers: HeaderMap,
    p: AuthorizeParameters,
    browser: pages::Browser,
) -> Response {
    if dashboard::is_dashboard(p.to_params().client_id.as_deref()) {
        return dashboard_authorize(&st, &headers, &p, &browser).await;
    }
    let req = match st.app.check_authorize(&p.to_params()).await {
        Ok(r) => r,
        Err(e) => return refuse(&st, e),
    };
    match session_user(&st, &headers, &req, &browser).await {
        Some((user, session)) if !req.needs_fresh_login(session.auth_time) => {
            match session_serves(&st, &req, &p, &headers, &user, &session).await {
                None => after_sign_in(&st, &req, &p, &headers, &user, &session).await,
                Some(first) => first,
            }
        }
        _ if req.prompt.none => refuse(
            &st,
            req.error(
                OAuthErrorKind::LoginRequired,
                "the person is not signed in (or signed in too long ago for max_age)",
            ),
        ),
        _ => login_page(&st, &req, &p, &headers, None, "").await,
    }
}

#[utoipa::path(
    get,
    path = "/oauth/authorize",
    operation_id = "authorize",
    tag = "OAuth",
    summary = "Start the authorization-code flow in a browser (sign-in and consent pages)",
    responses(
        (status = 200, description = "Sign-in or consent page (HTML)", body = crate::http::schemas::Html, content_type = "text/html"),
        (status = 303, description = "Back to the redirect URI"),
        (status = 400, description = "Unknown client or redirect URI (HTML)", body = crate::http::schemas::Html, content_type = "text/html"),
    ),
)]
pub(crate) async fn start(
    State(st): State<AppState>,
    browser: pages::Browser,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let p = AuthorizeParameters::from_query(uri.query().unwrap_or(""));
    authorize(st, headers, p, browser).await
}

/// D49: an authorization request may also be a form POST. A repeated
/// parameter is refused like in a query (D45 continued), after the
/// redirect URI is known.
async fn start_by_post(
    State(st): State<AppState>,
    browser: pages::Browser,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let form = match crate::http::form::Form::read_reporting(&parts.headers, body).await {
        Ok(f) => f,
        Err(p) => {
            let m = pages::form_problem(p);
            return pages::message(&st, StatusCode::BAD_REQUEST, "Something went wrong", m);
        }
    };
    authorize(
        st,
        parts.headers,
        AuthorizeParameters::from_form(&form),
        browser,
    )
    .await
}

/// The request a sign-in page serves: a client's (its organization bounds
/// the accounts that may sign in, D26) or the dashboard's (any
/// organization, D48). The one place that tells them apart for the pages
/// that follow the password (the second step, D56) and for the passkey
/// sign-in beside it.
pub(crate) enum SignInRequest {
    Client(Box<AuthorizeRequest>),
    Dashboard(DashboardRequest),
}

impl SignInRequest {
    /// The request the form carries, checked; the refusal otherwise.
    pub(crate) async fn check(st: &AppState, p: &AuthorizeParameters) -> Result<Self, Response> {
        let params = p.to_params();
        if dashboard::is_dashboard(params.client_id.as_deref()) {
            st.app
                .check_dashboard_authorize(&params)
                .map(Self::Dashboard)
                .map_err(|e| refuse(st, e))
        } else {
            match st.app.check_authorize(&params).await {
                Ok(r) => Ok(Self::Client(Box::new(r))),
                Err(e) => Err(refuse(st, e)),
            }
        }
    }

    /// The organization the client belongs to; `None` for the dashboard.
    pub(crate) fn org(&self) -> Option<&gatehouse_domain::OrgId> {
        match self {
            Self::Client(r) => Some(&r.client.org),
            Self::Dashboard(_) => None,
        }
    }

    /// The client a session begun here is for.
    pub(crate) fn client_id(&self) -> gatehouse_domain::ClientId {
        match self {
            Self::Client(r) => r.client.id.clone(),
            Self::Dashboard(_) => dashboard::dashboard_client_id(),
        }
    }

    /// The sign-in page again, with `error`.
    pub(super) async fn login_page(
        &self,
        st: &AppState,
        p: &AuthorizeParameters,
        headers: &HeaderMap,
        error: Option<&str>,
    ) -> Response {
        match self {
            Self::Client(req) => login_page(st, req, p, headers, error, "").await,
            Self::Dashboard(req) => dashboard_login_page(st, req, p, headers, error, ""),
        }
    }

    /// Where a completed sign-in goes: consent or the redirect (D26, D49),
    /// or the dashboard's code (D48).
    pub(crate) async fn signed_in(
        &self,
        st: &AppState,
        p: &AuthorizeParameters,
        headers: &HeaderMap,
        user: &User,
        session: &Session,
    ) -> Response {
        match self {
            Self::Client(req) => after_sign_in(st, req, p, headers, user, session).await,
            Self::Dashboard(req) => dashboard_code(st, req, user, session),
        }
    }
}

pub(crate) const LOGIN_FAILED: &str = "That e-mail and password do not match an account that can sign in here, or sign-in is paused for a while after too many attempts.";

async fn login(
    State(st): State<AppState>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    browser: pages::Browser,
    request: Request,
) -> Response {
    let (headers, form) = match pages::checked_form(&st, request, pages::FORM_EXPIRED).await {
        Ok(f) => f,
        Err(res) => return *res,
    };
    let p = AuthorizeParameters::from_form(&form);
    if dashboard::is_dashboard(p.to_params().client_id.as_deref()) {
        return dashboard_login(&st, peer, &headers, &form, &p, &browser).await;
    }
    let req = match st.app.check_authorize(&p.to_params()).await {
        Ok(r) => r,
        Err(e) => return refuse(&st, e),
    };
    let email = form.value("email").unwrap_or("");
    let password = form.value("password").unwrap_or("");
    let source = pages::client_ip(&headers, peer, &st.config.trusted_proxies).to_string();
    match st
        .app
        .login(
            &req.client.org,
            email,
            password,
            &source,
            Some(&req.client.id),
            browser.request.as_ref(),
        )
        .await
    {
        Ok(user) => {
            // D56: the second factor, or the enrolment step, first.
            match st.app.next_step_for(&req.client.org, &user, &req.acr).await {
                Ok((SecondStep::Done, _)) => {}
                // D56: a request for `phr` asks for a passkey alone.
                Ok((step, passkey_only)) => {
                    return second_step::begin(
                        &st,
                        &headers,
                        &p,
                        &req.client.org,
                        &user,
                        None,
                        step,
                        passkey_only,
                    )
                    .await;
                }
                Err(e) => {
                    tracing::error!(cause = %e, "reading the second step failed");
                    return unavailable(&st);
                }
            }
            let created = st
                .app
                .create_session(
                    &user,
                    &req.client.org,
                    &req.client.id,
                    &browser.used,
                    browser.request.clone(),
                )
                .await;
            let Ok((token, session)) = created else {
                return unavailable(&st);
            };
            let mut res = after_sign_in(&st, &req, &p, &headers, &user, &session).await;
            let age = st.app.session_limits().cookie_max_age();
            pages::set_session_cookie(&st, &mut res, &token, Some(age));
            res
        }
        Err(LoginError::Failed) => {
            login_page(&st, &req, &p, &headers, Some(LOGIN_FAILED), email).await
        }
        Err(LoginError::Unavailable(cause)) => {
            tracing::error!(%cause, "login failed on storage");
            unavailable(&st)
        }
    }
}

async fn decide(
    State(st): State<AppState>,
    browser: pages::Browser,
    ctx: crate::http::middleware::RequestCtx,
    request: Request,
) -> Response {
    let expired = "The form expired or came from another site. Go back and try again.";
    let (headers, form) = match pages::checked_form(&st, request, expired).await {
        Ok(f) => f,
        Err(res) => return *res,
    };
    let p = AuthorizeParameters::from_form(&form);
    let req = match st.app.check_authorize(&p.to_params()).await {
        Ok(r) => r,
        Err(e) => return refuse(&st, e),
    };
    let Some((user, session)) = session_user(&st, &headers, &req, &browser).await else {
        return login_page(&st, &req, &p, &headers, None, "").await;
    };
    // The decision is for a session that still serves this request: past
    // the second step the policy or the level asked needs (D56). (Not
    // `prompt=login` or `max_age` again: the sign-in just shown met them.)
    if let Some(first) = session_serves(&st, &req, &p, &headers, &user, &session).await {
        return first;
    }
    match form.value("decision") {
        Some("allow") => {
            let granted = req.grantable(user.role);
            if granted.is_empty() {
                return refuse(
                    &st,
                    req.error(
                        OAuthErrorKind::InvalidScope,
                        "none of the requested scopes can be granted to this user",
                    ),
                );
            }
            // D49: remembered per (user, application) for what was granted.
            if let Err(e) = st
                .app
                .remember_consent(&req, &user, granted, &ctx.request_ref(None))
                .await
            {
                tracing::error!(cause = %e, "remembering a consent failed");
                return refuse(
                    &st,
                    req.error(OAuthErrorKind::Unavailable, "try again in a moment"),
                );
            }
            grant(&st, &req, &user, &session, granted).await
        }
        Some("deny") => {
            let mut pairs = vec![("error", OAuthErrorKind::AccessDenied.as_str())];
            if let Some(s) = &req.state {
                pairs.push(("state", s.as_str()));
            }
            redirect_to(&st, &req.redirect_uri, &pairs)
        }
        _ => pages::message(
            &st,
            StatusCode::BAD_REQUEST,
            "Something went wrong",
            "Choose Allow or Deny.",
        ),
    }
}

// D48: the built-in dashboard client. Its sign-in asks for e-mail and
// password only (no organization: the client has none); when they match
// accounts in several organizations, the person picks one. There is no
// consent page.

/// The dashboard's request: a live browser session of any organization
/// signs the person in at once (unless `prompt=login`), else the sign-in page.
async fn dashboard_authorize(
    st: &AppState,
    headers: &HeaderMap,
    p: &AuthorizeParameters,
    browser: &pages::Browser,
) -> Response {
    let req = match st.app.check_dashboard_authorize(&p.to_params()) {
        Ok(r) => r,
        Err(e) => return refuse(st, e),
    };
    if !req.fresh_login
        && let Some(cookie) = pages::session_cookie(st, headers)
    {
        match st.app.any_session_user(&cookie, &browser.used).await {
            Ok(Some((user, session))) => {
                // D48 (revised): the policy holds for the dashboard too.
                let acr = gatehouse_domain::mfa::AcrRequest::default();
                return match st.app.step_up_for(&session, &user, &acr).await {
                    Ok(StepUp::Needed(step)) => {
                        second_step::begin(
                            st,
                            headers,
                            p,
                            &session.org,
                            &user,
                            Some(&session),
                            step,
                            false,
                        )
                        .await
                    }
                    Ok(_) => dashboard_code(st, &req, &user, &session),
                    Err(e) => {
                        tracing::error!(cause = %e, "reading the second step failed");
                        unavailable(st)
                    }
                };
            }
            Ok(None) => {}
            Err(e) => {
                tracing::error!(cause = %e, "dashboard: reading the session failed");
                return unavailable(st);
            }
        }
    }
    dashboard_login_page(st, &req, p, headers, None, "")
}

pub(super) fn dashboard_code(
    st: &AppState,
    req: &DashboardRequest,
    user: &User,
    session: &Session,
) -> Response {
    let code = st
        .app
        .issue_dashboard_code(req, user, &session.org, session);
    let mut pairs = vec![("code", code.as_str())];
    if let Some(s) = &req.state {
        pairs.push(("state", s.as_str()));
    }
    redirect_to(st, &req.redirect_uri, &pairs)
}

pub(super) fn dashboard_login_page(
    st: &AppState,
    req: &DashboardRequest,
    p: &AuthorizeParameters,
    headers: &HeaderMap,
    error: Option<&str>,
    email: &str,
) -> Response {
    let (csrf, new) = pages::csrf_token(st, headers);
    let status = if error.is_some() {
        StatusCode::UNAUTHORIZED
    } else {
        StatusCode::OK
    };
    let email = if email.is_empty() {
        req.login_hint.as_deref().unwrap_or("")
    } else {
        email
    };
    let res = st.templates.page_with_status(
        status,
        "login.html",
        context! {
            client_name => "the Gatehouse dashboard", org_name => "",
            client_id => dashboard::DASHBOARD_CLIENT_ID, csrf => &csrf, forgot => false,
            params => p.hidden(), error => error, email => email,
            passkey => crate::web::passkeys::sign_in_offer(st, headers),
        },
    );
    pages::with_csrf(st, res, &csrf, new)
}

/// Signs `user` in (a new browser session) and sends the code.
async fn dashboard_signed_in(
    st: &AppState,
    (headers, p): (&HeaderMap, &AuthorizeParameters),
    req: &DashboardRequest,
    org: &gatehouse_domain::OrgId,
    user: &User,
    browser: &pages::Browser,
) -> Response {
    // D48 (revised): the account's second factor under D56 first.
    match st.app.next_step(org, user).await {
        Ok(SecondStep::Done) => {}
        Ok(step) => {
            return second_step::begin(st, headers, p, org, user, None, step, false).await;
        }
        Err(e) => {
            tracing::error!(cause = %e, "reading the second step failed");
            return unavailable(st);
        }
    }
    let created = st
        .app
        .create_session(
            user,
            org,
            &dashboard::dashboard_client_id(),
            &browser.used,
            browser.request.clone(),
        )
        .await;
    let Ok((token, session)) = created else {
        return unavailable(st);
    };
    let mut res = dashboard_code(st, req, user, &session);
    let age = st.app.session_limits().cookie_max_age();
    pages::set_session_cookie(st, &mut res, &token, Some(age));
    res
}

async fn dashboard_login(
    st: &AppState,
    peer: std::net::SocketAddr,
    headers: &HeaderMap,
    form: &crate::http::form::Form,
    p: &AuthorizeParameters,
    browser: &pages::Browser,
) -> Response {
    let req = match st.app.check_dashboard_authorize(&p.to_params()) {
        Ok(r) => r,
        Err(e) => return refuse(st, e),
    };
    let email = form.value("email").unwrap_or("");
    let password = form.value("password").unwrap_or("");
    let source = pages::client_ip(headers, peer, &st.config.trusted_proxies).to_string();
    match st
        .app
        .login_anywhere(email, password, &source, browser.request.as_ref())
        .await
    {
        Ok(matches) if matches.len() == 1 => {
            dashboard_signed_in(
                st,
                (headers, p),
                &req,
                &matches[0].org.id,
                &matches[0].user,
                browser,
            )
            .await
        }
        Ok(matches) => {
            let (csrf, new) = pages::csrf_token(st, headers);
            let accounts: Vec<_> = matches
                .iter()
                .map(|m| {
                    context! {
                        org => m.org.id.as_str(), org_name => &m.org.name,
                        role => m.user.role.as_str(),
                    }
                })
                .collect();
            let res = st.templates.page(
                "pick_org.html",
                context! { csrf => &csrf, params => p.hidden(), accounts, email => email },
            );
            let mut res = pages::with_csrf(st, res, &csrf, new);
            // D48 (continued): the choice stays in this browser's cookie,
            // never in the page, and is spent by its first use.
            pages::set_cookie(
                st,
                &mut res,
                Cookies::of(st).dashboard_pick(),
                &st.app.seal_pick(&matches),
                Some(dashboard::PICK_TTL_SECS),
            );
            res
        }
        Err(LoginError::Failed) => {
            dashboard_login_page(st, &req, p, headers, Some(LOGIN_FAILED), email)
        }
        Err(LoginError::Unavailable(cause)) => {
            tracing::error!(%cause, "dashboard login failed on storage");
            unavailable(st)
        }
    }
}

/// D48: the account picked when the e-mail and password matched several.
async fn pick_account(
    State(st): State<AppState>,
    browser: pages::Browser,
    request: Request,
) -> Response {
    let (headers, form) = match pages::checked_form(&st, request, pages::FORM_EXPIRED).await {
        Ok(f) => f,
        Err(res) => return *res,
    };
    let p = AuthorizeParameters::from_form(&form);
    let req = match st.app.check_dashboard_authorize(&p.to_params()) {
        Ok(r) => r,
        Err(e) => return refuse(&st, e),
    };
    let pick_cookie = Cookies::of(&st).dashboard_pick();
    let sealed = pages::cookie(&headers, pick_cookie).unwrap_or_default();
    let Some(org) = form.value("org") else {
        return pages::message(
            &st,
            StatusCode::BAD_REQUEST,
            "Choose an organization",
            "Go back and choose the organization to sign in to.",
        );
    };
    let mut res = match st.app.open_pick(&sealed, org).await {
        Ok(Some((org, user))) => {
            dashboard_signed_in(&st, (&headers, &p), &req, &org, &user, &browser).await
        }
        Ok(None) => dashboard_login_page(
            &st,
            &req,
            &p,
            &headers,
            Some("That choice expired or was made already. Sign in again."),
            "",
        ),
        Err(e) => {
            tracing::error!(cause = %e, "dashboard: reading the chosen account failed");
            unavailable(&st)
        }
    };
    pages::set_cookie(&st, &mut res, pick_cookie, "", Some(0));
    res
}
