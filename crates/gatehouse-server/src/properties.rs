//! Property tests of the HTTP edge's parsers of untrusted input (issue 11):
//! JSON bodies, form bodies, query strings, `Authorization` (bearer and
//! HTTP Basic), `Prefer`, and the recognition of hyper's own error answers.
//! Arbitrary input never panics; what parses round-trips. The number of
//! cases comes from `PROPTEST_CASES` (`.ci/run` bounds it).

use axum::http::{HeaderMap, HeaderValue, header};
use base64::Engine;
use proptest::prelude::*;
use serde_json::{Map, Value};

use crate::api::extract::{Query, bearer_token, parse_json_object};
use crate::api::oauth::client_auth;
use crate::http::form::Form;

/// JSON values without floats (they do not round-trip through text exactly).
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// RFC 6749 §2.3.1: id and secret are form-encoded before Basic encoding.
fn form_encode(s: &str) -> String {
    url_encode(s).replace("%20", "+")
}

fn url_encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

proptest! {
    #[test]
    fn json_bodies_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_json_object(&bytes);
    }

    #[test]
    fn json_text_never_panics(text in "[{}\\[\\]\",:a-c0-9 \\\\]{0,64}") {
        let _ = parse_json_object(text.as_bytes());
    }

    #[test]
    fn json_objects_round_trip(map in prop::collection::btree_map(any::<String>(), json_value(), 0..6)) {
        let object: Map<String, Value> = map.into_iter().collect();
        let text = serde_json::to_vec(&Value::Object(object.clone())).unwrap();
        let parsed = parse_json_object(&text).expect("a serialized object parses");
        prop_assert_eq!(parsed, object);
    }

    #[test]
    fn a_repeated_key_is_always_named(key in "[a-z]{1,8}", a in any::<i64>(), b in any::<i64>()) {
        let text = format!("{{\"{key}\":{a},\"{key}\":{b}}}");
        let err = parse_json_object(text.as_bytes()).unwrap_err();
        prop_assert_eq!(err.details.len(), 1);
        prop_assert_eq!(&err.details[0].field, &key);
        prop_assert_eq!(&err.details[0].issue, "duplicate key");
    }

    #[test]
    fn form_bodies_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = Form::parse(&bytes);
    }

    #[test]
    fn forms_round_trip(pairs in prop::collection::btree_map("[a-z_]{1,12}", any::<String>(), 0..6)) {
        let body = serde_urlencoded::to_string(pairs.iter().collect::<Vec<_>>()).unwrap();
        let form = Form::parse(body.as_bytes()).expect("an encoded form parses");
        for (k, v) in &pairs {
            // Empty values read as absent (RFC 6749 §3.1).
            prop_assert_eq!(form.get(k), Some(v.as_str()).filter(|v| !v.is_empty()));
        }
    }

    #[test]
    fn query_strings_never_panic(raw in any::<String>()) {
        let _ = Query::parse(&raw);
    }

    #[test]
    fn queries_round_trip(pairs in prop::collection::btree_map("[a-z_]{1,12}", any::<String>(), 0..6)) {
        let raw = serde_urlencoded::to_string(pairs.iter().collect::<Vec<_>>()).unwrap();
        let q = Query::parse(&raw).expect("an encoded query parses");
        for (k, v) in &pairs {
            prop_assert_eq!(q.get(k), Some(v.as_str()));
        }
        prop_assert!(q.finish().is_ok());
    }

    #[test]
    fn authorization_values_never_panic(raw in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(v) = HeaderValue::from_bytes(&raw) {
            let _ = bearer_token(&v);
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, v);
            let _ = client_auth(&headers, &Form::parse(b"").unwrap());
        }
    }

    #[test]
    fn bearer_tokens_round_trip(token in "[A-Za-z0-9._~+/-]{1,200}=*") {
        let v = HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
        prop_assert_eq!(bearer_token(&v).unwrap(), token.as_str());
    }

    #[test]
    fn basic_credentials_round_trip(id in "[ -~]{1,40}", secret in "[ -~]{0,80}") {
        // Printable ASCII, with ':' and spaces escaped by the form encoding.
        let raw = format!("{}:{}", form_encode(&id), form_encode(&secret));
        let value = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(raw));
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_str(&value).unwrap());
        let auth = client_auth(&headers, &Form::parse(b"").unwrap()).expect("parses");
        prop_assert_eq!(auth.client_id, id);
        prop_assert_eq!(auth.secret, Some(secret).filter(|s| !s.is_empty()));
    }

    #[test]
    fn prefer_never_panics(raw in prop::collection::vec(any::<u8>(), 0..128)) {
        if let Ok(v) = HeaderValue::from_bytes(&raw) {
            let mut headers = HeaderMap::new();
            headers.insert("prefer", v);
            let _ = crate::mock::preferred_code(&headers);
        }
    }

    #[test]
    fn prefer_codes_round_trip(i in 0..crate::mock::PREFERRED_CODES.len(), other in "[a-z]{1,8}=[a-z0-9]{1,8}") {
        let code = crate::mock::PREFERRED_CODES[i];
        let mut headers = HeaderMap::new();
        headers.insert("prefer", HeaderValue::from_str(&format!("{other}, code={code}")).unwrap());
        let got = crate::mock::preferred_code(&headers).expect("a code").expect("a valid one");
        prop_assert_eq!(got, code);
    }

    #[test]
    fn written_bytes_never_panic_the_error_rewriter(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let config = crate::http::transport::TransportConfig::new("https://gatehouse.example", true);
        let _ = crate::http::transport::hyper_error_answer(&bytes, &config);
    }
}
