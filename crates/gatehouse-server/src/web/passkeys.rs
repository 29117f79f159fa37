//! D56: passkeys on Gatehouse's own pages. The sign-in pages (D26, and the
//! dashboard's, D48 revised) offer a passwordless sign-in beside the
//! password form; the second step offers the person's passkeys beside the
//! code. The ceremonies need script (`/docs/assets/passkeys.js`, served by
//! the binary under the pages' CSP, no inline script): without it the
//! passkey forms stay hidden and the password path works as before.
//!
//! A form carries the options for the browser (`data-options`) and the
//! offer sealed under the master key; the script puts the authenticator's
//! answer (`PublicKeyCredential.toJSON()`) in its `answer` field and posts
//! it. Each offer is spent once in storage (`gatehouse_app::passkeys`).

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::response::Response;
use axum::routing::post;
use gatehouse_app::passkeys::{PasskeyChallenge, PasskeySignInError};
use minijinja::{Value, context};

use crate::api::oauth_wire::AuthorizeParameters;
use crate::state::AppState;
use crate::web::authorize::{self, SignInRequest};
use crate::web::pages;

pub fn router() -> Router<AppState> {
    Router::new().route("/oauth/authorize/passkey-login", post(passkey_login))
}

/// D56: a counter that did not increase.
pub(crate) const SIGN_COUNT: &str = "This passkey was refused: its signature counter did not move forward, which happens when an authenticator was copied. Use another way to sign in, and remove this passkey from your account page.";
/// D56: a passwordless sign-in needs user verification.
const NOT_VERIFIED: &str = "Your passkey did not verify you (with a PIN, fingerprint or face), so it cannot sign you in without your password. Sign in with your password; your passkey can then confirm it.";
const OFFER_EXPIRED: &str = "That passkey request expired. Try again.";

/// A passkey form's part of a page: the options for the script (JSON) and
/// the sealed offer.
pub(crate) fn offer_view(c: &PasskeyChallenge) -> Value {
    context! { options => c.options.to_string(), sealed => &c.sealed }
}

/// Whether this page may offer passkeys: always where the relying party is
/// `public_url`'s host; in the mock (D53 continued) only when it is
/// reached as `localhost`, its relying party.
pub(crate) fn offered_here(st: &AppState, headers: &HeaderMap) -> bool {
    if !st.config.mock {
        return true;
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let name = host.rsplit_once(':').map_or(host, |(n, _)| n);
    name.eq_ignore_ascii_case("localhost")
}

/// The passwordless offer of a sign-in page, when passkeys are offered at
/// this address.
pub(crate) fn sign_in_offer(st: &AppState, headers: &HeaderMap) -> Option<Value> {
    if !offered_here(st, headers) {
        return None;
    }
    st.app.passkey_sign_in_offer().as_ref().map(offer_view)
}

/// `POST /oauth/authorize/passkey-login`: a passwordless sign-in (D56: user
/// verification required; D26's password throttles play no part).
async fn passkey_login(
    State(st): State<AppState>,
    browser: pages::Browser,
    request: Request,
) -> Response {
    let (headers, form) = match pages::checked_form(&st, request, pages::FORM_EXPIRED).await {
        Ok(f) => f,
        Err(res) => return *res,
    };
    let p = AuthorizeParameters::from_form(&form);
    let req = match SignInRequest::check(&st, &p).await {
        Ok(r) => r,
        Err(refused) => return refused,
    };
    let sealed = form.value("assertion").unwrap_or("");
    let answer = form.value("answer").unwrap_or("");
    let why = match st.app.passkey_sign_in(sealed, answer, req.org()).await {
        Ok(signed) => {
            let created = st
                .app
                .create_session_with(
                    &signed.user,
                    &signed.org,
                    &req.client_id(),
                    &browser.used,
                    browser.request.clone(),
                    &signed.amr,
                )
                .await;
            let (token, session) = match created {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(cause = %e, "creating a session failed");
                    return authorize::unavailable(&st);
                }
            };
            // The passkey met every level (`phr`) and the policy (`mfa`):
            // on to consent or the redirect, or the dashboard's code.
            let mut res = req
                .signed_in(&st, &p, &headers, &signed.user, &session)
                .await;
            let age = st.app.session_limits().cookie_max_age();
            pages::set_session_cookie(&st, &mut res, &token, Some(age));
            return res;
        }
        // D56: an account outside the client's organization reads like a
        // wrong password.
        Err(PasskeySignInError::Wrong) => authorize::LOGIN_FAILED,
        Err(PasskeySignInError::NotVerified) => NOT_VERIFIED,
        Err(PasskeySignInError::SignCount) => SIGN_COUNT,
        Err(PasskeySignInError::Expired | PasskeySignInError::AttemptEnded) => OFFER_EXPIRED,
        Err(PasskeySignInError::Failed(e)) => {
            tracing::error!(cause = %e, "a passkey sign-in failed on storage");
            return authorize::unavailable(&st);
        }
    };
    req.login_page(&st, &p, &headers, Some(why)).await
}
