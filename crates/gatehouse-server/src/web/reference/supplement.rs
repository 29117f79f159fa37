//! D49's endpoints in the OpenAPI document's shape, for the pages only.

use serde_json::{Value, json};

/// D49's endpoints, in the document's shape, for the pages only (the
/// generated document describes what the code serves; these are added to
/// the pages until the code documents them itself).
pub fn supplement() -> Value {
    let oauth_error =
        json!({"application/json": {"schema": {"$ref": "#/components/schemas/OAuthError"}}});
    let client_auth_props = json!({
        "client_id": {"type": "string", "description": "With `client_secret_post`; omit with HTTP Basic."},
        "client_secret": {"type": "string", "description": "With `client_secret_post`; omit with HTTP Basic."},
    });
    let mut introspect_props = json!({
        "token": {"type": "string", "description": "An access token or API key of your organization, or a refresh token issued to you."},
        "token_type_hint": {"type": "string", "enum": ["access_token", "refresh_token", "api_key"], "description": "Where to look first; the answer is the same without it."},
    });
    let logout_props = json!({
        "id_token_hint": {"type": "string", "description": "An ID token the client received (an expired one is fine): names the user, session and client. Only one of the person's current session signs them out without asking."},
        "client_id": {"type": "string", "description": "The client, when there is no hint; sent with one, it must be the hint's `aud`."},
        "post_logout_redirect_uri": {"type": "string", "description": "Where to send the browser afterwards; must be registered exactly for the client (`post_logout_redirect_uris`)."},
        "state": {"type": "string", "description": "Returned unchanged on the redirect."},
    });
    for (k, v) in client_auth_props.as_object().into_iter().flatten() {
        introspect_props[k] = v.clone();
    }
    let userinfo_answer = json!({
        "200": {"description": "Claims of the user (OpenID Connect Core §5.3)", "content": {"application/json": {"schema": {"type": "object", "required": ["sub"], "properties": {
            "sub": {"type": "string", "description": "The user's id (`usr_…`)."},
            "name": {"type": "string", "description": "With `profile`."},
            "updated_at": {"type": "integer", "description": "With `profile`: epoch seconds."},
            "email": {"type": "string", "description": "With `email`."},
            "email_verified": {"type": "boolean", "description": "With `email`: true once the person accepted an invitation or reset their password."},
        }}}}},
        "401": {"description": "No, malformed, expired or revoked access token (`WWW-Authenticate: Bearer error=\"invalid_token\"`)", "x-error-codes": ["invalid_token"]},
        "403": {"description": "The token was not granted `openid` (`WWW-Authenticate: Bearer error=\"insufficient_scope\"`)", "x-error-codes": ["insufficient_scope"]},
    });
    let logout_answers = json!({
        "303": {"description": "To the registered `post_logout_redirect_uri`, with `state`"},
        "200": {"description": "A signed-out page, or a page asking to confirm unless the hint names the current session (HTML)", "content": {"text/html": {"schema": {"$ref": "#/components/schemas/Html"}}}},
        "400": {"description": "The hint and `client_id` name different clients, or a parameter is given twice: an error page (HTML); nothing ends", "content": {"text/html": {"schema": {"$ref": "#/components/schemas/Html"}}}},
    });
    let logout = |method: &str| {
        let mut op = json!({
            "operationId": if method == "get" { "logout" } else { "logoutPost" },
            "tags": ["OAuth"],
            "summary": format!("End the browser session (OpenID Connect RP-initiated logout), by {}", method.to_ascii_uppercase()),
            "description": "Ends the person's Gatehouse session and revokes the refresh chains begun in it, then redirects to `post_logout_redirect_uri` when it is registered for the client the hint or `client_id` names (exact match, no loopback port leeway); otherwise shows a signed-out page. Only an `id_token_hint` whose `sub` and `sid` name the current session ends it at once; any other hint, or none, asks the person to confirm first (D49 revised). With a session, only a client of its organization is followed; without one, a valid hint's client is followed at once.",
            "responses": logout_answers.clone(),
        });
        if method == "get" {
            op["parameters"] = Value::Array(
                logout_props
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(n, s)| json!({"name": n, "in": "query", "required": false, "description": s["description"], "schema": {"type": "string"}}))
                    .collect(),
            );
        } else {
            op["requestBody"] = json!({"content": {"application/x-www-form-urlencoded": {"schema": {"type": "object", "properties": logout_props.clone()}}}});
        }
        op
    };
    let q = |name: &str, required: bool, description: &str, schema: Value| json!({"name": name, "in": "query", "required": required, "description": description, "schema": schema});
    let authorize_params = json!([
        q(
            "response_type",
            true,
            "`code` (the only flow).",
            json!({"type": "string", "enum": ["code"]})
        ),
        q(
            "client_id",
            true,
            "Your application's id (`app_…`).",
            json!({"type": "string"})
        ),
        q(
            "redirect_uri",
            true,
            "One of the application's registered redirect URIs, exactly (loopback `http://127.0.0.1` URIs may change the port).",
            json!({"type": "string"})
        ),
        q(
            "scope",
            false,
            "Space-separated. Omitted: what the application is registered for, within the person's role, without `admin`, `openid`, `profile` or `email`. Scopes the application or role may not have are dropped.",
            json!({"type": "string"})
        ),
        q(
            "state",
            false,
            "An unguessable value you check when the browser comes back; returned unchanged.",
            json!({"type": "string"})
        ),
        q(
            "code_challenge",
            true,
            "PKCE (RFC 7636): base64url of the SHA-256 of your `code_verifier`.",
            json!({"type": "string"})
        ),
        q(
            "code_challenge_method",
            true,
            "`S256`; `plain` is refused.",
            json!({"type": "string", "enum": ["S256"]})
        ),
        q(
            "nonce",
            false,
            "OpenID Connect: echoed in the ID token.",
            json!({"type": "string"})
        ),
        q(
            "prompt",
            false,
            "`none` (never show a page: answers `login_required` or `consent_required` instead), `login` (sign in again), `consent` (ask again).",
            json!({"type": "string", "enum": ["none", "login", "consent"]})
        ),
        q(
            "max_age",
            false,
            "Seconds since the person last signed in after which they must sign in again.",
            json!({"type": "integer", "minimum": 0})
        ),
        q(
            "login_hint",
            false,
            "Pre-fills the e-mail on the sign-in page.",
            json!({"type": "string"})
        ),
        q(
            "acr_values",
            false,
            "Levels you would like, space-separated, in order of preference: `urn:gatehouse:acr:pwd` (a password), `urn:gatehouse:acr:mfa` (a password and a second factor), `phr` (a passkey). Voluntary: a person with a second factor is asked for it to reach the first supported level; a person without one signs in anyway. The ID token's `acr` tells what was reached; unknown values are ignored.",
            json!({"type": "string"})
        ),
        q(
            "claims",
            false,
            "OpenID Connect's claims request (JSON). Only an Essential `acr` is honoured, e.g. `{\"id_token\":{\"acr\":{\"essential\":true,\"value\":\"urn:gatehouse:acr:mfa\"}}}`: the person steps up to that level, or the browser comes back with `error=unmet_authentication_requirements` (`login_required` with `prompt=none`). A value that is not a JSON object is `invalid_request`.",
            json!({"type": "string"})
        ),
    ]);
    json!({
        "/oauth/authorize": {"get": {
            "parameters": authorize_params,
            "description": "Send the person's browser here (GET, or POST with the same parameters as a form). Gatehouse checks `client_id` and `redirect_uri` first — if either is wrong it shows an error page and never redirects — then shows its sign-in and consent pages and sends the browser back to `redirect_uri` with `code`, `state` and `iss`, or with `error` (see the codes below). Exchange the code at `POST /oauth/token` within 5 minutes, with the `code_verifier`.",
        }},
        "/oauth/introspect": {"post": {
            "operationId": "introspect", "tags": ["OAuth"], "x-client-auth": true,
            "summary": "Token introspection (RFC 7662)",
            "description": "For confidential clients (a public client gets 401 `invalid_client`); the client authenticates as at the token endpoint. Answers `{\"active\": false}` for anything invalid, expired, revoked, unknown, of another organization, or (refresh tokens) issued to another client. Introspecting never uses up a refresh token.",
            "requestBody": {"required": true, "content": {"application/x-www-form-urlencoded": {"schema": {"type": "object", "required": ["token"], "properties": introspect_props}}}},
            "responses": {
                "200": {"description": "Whether the token is active, and if so what it carries", "content": {"application/json": {"schema": {"type": "object", "required": ["active"], "properties": {
                    "active": {"type": "boolean"},
                    "scope": {"type": "string", "description": "Space-separated scopes."},
                    "client_id": {"type": "string", "description": "Absent for an API key."},
                    "sub": {"type": "string", "description": "The user, the client (no user), or the API key's id."},
                    "exp": {"type": "integer", "description": "Epoch seconds; an API key's `expires_at`, or absent."},
                    "iat": {"type": "integer"},
                    "iss": {"type": "string"},
                    "aud": {"type": "string"},
                    "token_type": {"type": "string", "enum": ["Bearer"]},
                    "token_use": {"type": "string", "enum": ["access_token", "refresh_token", "api_key"]},
                    "org": {"type": "string", "description": "The organization (`org_…`)."},
                    "amr": {"type": "array", "items": {"type": "string"}, "description": "How the person signed in (RFC 8176): `[\"pwd\"]`, or `[\"pwd\",\"otp\",\"mfa\"]` with a second factor. A person's tokens only, of sign-ins since second factors came."},
                    "acr": {"type": "string", "description": "The level reached: `urn:gatehouse:acr:pwd`, `urn:gatehouse:acr:mfa` or `phr`."},
                    "auth_time": {"type": "integer", "description": "Epoch seconds of the sign-in or the latest step-up."},
                }}}}},
                "400": {"description": "OAuth error", "content": oauth_error.clone()},
                "401": {"description": "Client authentication failed, or a public client", "content": oauth_error.clone()},
                "429": {"description": "Too many failed client authentications", "content": oauth_error.clone()},
            },
        }},
        "/oauth/userinfo": {
            "get": {"operationId": "userinfo", "tags": ["OAuth"], "x-bearer": true,
                "summary": "Claims about the signed-in user (OpenID Connect)",
                "description": "Send the access token as `Authorization: Bearer`. Returns `sub` and the claims of the token's scopes: `profile` → `name`, `updated_at`; `email` → `email`, `email_verified`. CORS is allowed for the configured origins.",
                "responses": userinfo_answer.clone()},
            "post": {"operationId": "userinfoPost", "tags": ["OAuth"], "x-bearer": true,
                "summary": "Claims about the signed-in user, by POST",
                "description": "The same as `GET /oauth/userinfo`.",
                "responses": userinfo_answer},
        },
        "/oauth/logout": {"get": logout("get"), "post": logout("post")},
        "/.well-known/openid-configuration": {"get": {
            "operationId": "openidConfiguration", "tags": ["Discovery"],
            "summary": "OpenID Connect discovery document",
            "description": "The server metadata (issuer, endpoints, `jwks_uri`, supported scopes, grants and PKCE methods) plus `userinfo_endpoint`, `end_session_endpoint`, `introspection_endpoint`, `subject_types_supported: [\"public\"]`, `id_token_signing_alg_values_supported: [\"ES256\"]`, `claims_supported` (with `amr`, `acr` and `auth_time`), `acr_values_supported` (`urn:gatehouse:acr:pwd`, `urn:gatehouse:acr:mfa`, `phr`, lowest first), `claims_parameter_supported: true`, `authorization_response_iss_parameter_supported: true` and `request_uri_parameter_supported: false`. OpenID Connect libraries read it to configure themselves.",
            "responses": {"200": {"description": "Metadata", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Object"}}}}},
        }},
    })
}

/// The document with [`supplement`]'s operations added where it lacks them.
pub fn with_supplement(mut doc: Value) -> Value {
    let extra = supplement();
    for (path, item) in extra.as_object().into_iter().flatten() {
        for (method, op) in item.as_object().into_iter().flatten() {
            let slot = &mut doc["paths"][path.as_str()];
            match slot.get_mut(method.as_str()) {
                // The POST twins of userinfo and logout (D49), which the
                // generated document describes once, by GET.
                None => slot[method.as_str()] = op.clone(),
                // What the generated operation does not say yet (the
                // authorization request's parameters) is added to it.
                Some(existing) => {
                    for key in ["parameters", "description"] {
                        if existing.get(key).is_none()
                            && let Some(v) = op.get(key)
                        {
                            existing[key] = v.clone();
                        }
                    }
                }
            }
        }
    }
    doc
}
