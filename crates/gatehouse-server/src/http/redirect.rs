//! Plain HTTP answers 301 to the same path and query on `public_url`'s HTTPS
//! origin, whatever the method, without reading a body (D31).

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Response, StatusCode, Uri, header};
use axum::response::IntoResponse;

/// `https://host[:port]` of `public_url`.
pub fn https_origin(public_url: &str) -> String {
    let rest = public_url.split_once("://").map_or(public_url, |(_, r)| r);
    let host = rest.split('/').next().unwrap_or(rest);
    format!("https://{host}")
}

pub fn to_https(public_url: &str, uri: &Uri) -> axum::response::Response {
    let pq = uri.path_and_query().map_or("/", |p| p.as_str());
    let target = format!("{}{pq}", https_origin(public_url));
    let mut res = Response::new(Body::empty());
    *res.status_mut() = StatusCode::MOVED_PERMANENTLY;
    if let Ok(v) = HeaderValue::from_str(&target) {
        res.headers_mut().insert(header::LOCATION, v);
    }
    res.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    res.into_response()
}

/// The router of the plain-HTTP listener: every request is redirected, with a request id.
pub fn router(public_url: String) -> Router {
    Router::new().fallback(move |uri: Uri, headers: axum::http::HeaderMap| {
        let public_url = public_url.clone();
        async move {
            let mut res = to_https(&public_url, &uri);
            // D7: a client's UUID is echoed, even on a redirect.
            let echoed = headers
                .get("x-request-id")
                .filter(|v| {
                    v.to_str()
                        .ok()
                        .is_some_and(|s| uuid::Uuid::try_parse(s).is_ok())
                })
                .cloned();
            let id = echoed.unwrap_or_else(|| {
                HeaderValue::from_str(&uuid::Uuid::new_v4().hyphenated().to_string())
                    .expect("uuid header")
            });
            res.headers_mut().insert("x-request-id", id);
            res
        }
    })
}
