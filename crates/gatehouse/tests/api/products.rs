//! `/v1/products`: interface.md §2.2, §4.4, D2, D4–D9, D16–D18.

use std::time::Duration;

use gatehouse_domain::{Name, NewProduct, OrgId, Product, Sku, Timestamp};
use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};

use crate::common::{PUBLIC_URL, TestServer, details, expect_error};
use crate::users::{
    assert_list_envelope, assert_recent, assert_single_envelope, assert_timestamp, body_of,
    expect_issues, expect_one_issue, ids, other_org, roomy_org,
};

const RW: &str = "products:read products:write";

/// POST /v1/products with `body`; returns the `data` of the 201.
async fn create_with(s: &TestServer, t: &str, body: Value) -> Value {
    let res = s.call(Method::POST, "/v1/products", t, Some(body)).await;
    body_of(res, StatusCode::CREATED).await["data"].clone()
}

async fn create(s: &TestServer, t: &str, name: &str, sku: &str, price: i64, stock: i64) -> Value {
    create_with(
        s,
        t,
        json!({"name": name, "sku": sku, "price": price, "stock": stock}),
    )
    .await
}

fn id_of(p: &Value) -> String {
    p["id"].as_str().unwrap().to_owned()
}

async fn get(s: &TestServer, t: &str, id: &str) -> Value {
    let res = s
        .call(Method::GET, &format!("/v1/products/{id}"), t, None)
        .await;
    body_of(res, StatusCode::OK).await["data"].clone()
}

async fn patch(s: &TestServer, t: &str, id: &str, body: Value) -> Response {
    s.call(Method::PATCH, &format!("/v1/products/{id}"), t, Some(body))
        .await
}

/// PATCH that must succeed; returns the updated product.
async fn patch_ok(s: &TestServer, t: &str, id: &str, body: Value) -> Value {
    let res = patch(s, t, id, body).await;
    let body = body_of(res, StatusCode::OK).await;
    assert_single_envelope(&body);
    body["data"].clone()
}

async fn list(s: &TestServer, t: &str, query: &str) -> Value {
    let res = s
        .call(Method::GET, &format!("/v1/products{query}"), t, None)
        .await;
    body_of(res, StatusCode::OK).await
}

/// The ids found by `q` (already URL-encoded).
async fn found(s: &TestServer, t: &str, q: &str) -> Vec<String> {
    let body = list(s, t, &format!("?q={q}")).await;
    let got = ids(&body);
    assert_eq!(
        body["meta"]["total"],
        got.len() as u64,
        "q={q}: total counts all matches"
    );
    got
}

async fn store_product(
    s: &TestServer,
    org: &OrgId,
    name: &str,
    sku: &str,
    stock: i64,
    at: Timestamp,
) -> Product {
    let p = NewProduct {
        name: Name::parse(name).unwrap(),
        sku: Sku::parse(sku).unwrap(),
        price: 100,
        stock,
        discontinued: false,
    };
    let tell = gatehouse_domain::event::Teller::new(
        gatehouse_domain::event::Origin::operator(),
        std::sync::Arc::new(gatehouse_server::Published),
    );
    s.store().insert_product(org, &p, at, &tell).await.unwrap()
}

async fn pause() {
    tokio::time::sleep(Duration::from_millis(4)).await;
}

// ---------------------------------------------------------------------------
// Create and read (D16, D5, D4, interface.md §2.2)
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d16_create_is_201_with_location_and_envelope() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let res = s
        .call(
            Method::POST,
            "/v1/products",
            &t,
            Some(json!({"name": "Blue Shirt", "sku": "SHIRT-BLUE-M", "price": 1999, "stock": 12})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let location = res
        .headers()
        .get("location")
        .expect("D16: Location")
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = res.json().await.unwrap();
    assert_single_envelope(&body);
    let p = &body["data"];
    let id = p["id"].as_str().unwrap();
    assert!(id.starts_with("prod_") && id.len() > 5 + 13, "D3 id: {id}");
    assert_eq!(location, format!("{PUBLIC_URL}/v1/products/{id}"));
    assert_eq!(p["name"], "Blue Shirt");
    assert_eq!(p["sku"], "SHIRT-BLUE-M");
    assert_eq!(p["price"], 1999);
    assert_eq!(p["stock"], 12);
    assert_eq!(p["status"], "available");
    assert_recent(&p["created_at"]); // D4
    for k in [
        "id",
        "name",
        "sku",
        "price",
        "stock",
        "status",
        "created_at",
    ] {
        assert!(p.get(k).is_some(), "interface.md §2.2 field {k}: {p}");
    }

    let res = s
        .call(Method::GET, &format!("/v1/products/{id}"), &t, None)
        .await;
    let got = body_of(res, StatusCode::OK).await;
    assert_single_envelope(&got);
    assert_eq!(got["data"], *p);

    let body = list(&s, &t, "").await;
    assert_list_envelope(&body, 1, 20, 0);
    assert_eq!(body["data"][0], *p);
}

// D16: reading needs products:read, writing products:write (D6 WWW-Authenticate).
#[tokio::test]
async fn d16_scopes_products_read_and_write() {
    let s = TestServer::start().await;
    let rw = s.token(RW).await;
    let p = create(&s, &rw, "Thing", "T-1", 1, 1).await;
    let path = format!("/v1/products/{}", id_of(&p));
    let www_read = "Bearer error=\"insufficient_scope\", scope=\"products:read\"";
    let www_write = "Bearer error=\"insufficient_scope\", scope=\"products:write\"";
    let check = |res: &Response, want: &str| {
        assert_eq!(
            res.headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok()),
            Some(want)
        );
    };

    // Without products:read (even with products:write and everything else).
    let no_read = s
        .token("users:read users:write profile:read profile:write products:write")
        .await;
    for p in [
        "/v1/products",
        "/v1/products?limit=abc",
        path.as_str(),
        "/v1/products/prod_unknownunknown",
    ] {
        let res = s.call(Method::GET, p, &no_read, None).await;
        check(&res, www_read);
        expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    }

    // Without products:write, D9: before the body and the resource are looked at.
    let read_only = s.token("products:read users:write").await;
    let res = s
        .call(
            Method::POST,
            "/v1/products",
            &read_only,
            Some(json!({"name": "X", "sku": "X-1", "price": 1, "stock": 1})),
        )
        .await;
    check(&res, www_write);
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = s
        .call(
            Method::POST,
            "/v1/products",
            &read_only,
            Some(json!({"price": -1})),
        )
        .await;
    check(&res, www_write);
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = s
        .request(Method::POST, "/v1/products")
        .bearer_auth(&read_only)
        .header("content-type", "text/plain")
        .body("x")
        .send()
        .await
        .unwrap();
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = s
        .call(Method::PATCH, &path, &read_only, Some(json!({"stock": 0})))
        .await;
    check(&res, www_write);
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = s
        .call(
            Method::PATCH,
            "/v1/products/prod_unknownunknown",
            &read_only,
            Some(json!({"price": "bad"})),
        )
        .await;
    check(&res, www_write);
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = s.call(Method::DELETE, &path, &read_only, None).await;
    check(&res, www_write);
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    let res = s
        .call(Method::DELETE, "/v1/products/usr_1", &read_only, None)
        .await;
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;

    // With products:read alone, reading works.
    let body = list(&s, &read_only, "").await;
    assert_list_envelope(&body, 1, 20, 0);
    assert_eq!(get(&s, &read_only, &id_of(&p)).await, p, "nothing changed");

    // No token at all: 401.
    let res = s.request(Method::GET, "/v1/products").send().await.unwrap();
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
    let res = s
        .request(Method::POST, "/v1/products")
        .header("content-type", "application/json")
        .body("{")
        .send()
        .await
        .unwrap();
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
    let res = s.request(Method::DELETE, &path).send().await.unwrap();
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;
    get(&s, &rw, &id_of(&p)).await;
}

// D8: price and stock are integers from 0 to 2^53−1.
#[tokio::test]
async fn d8_price_and_stock_validation() {
    let s = TestServer::start().await;
    let (_, t) = roomy_org(&s, RW).await;
    let bad: Vec<Value> = vec![
        json!(-1),
        json!(-9007199254740991i64),
        json!(1.5),
        json!(0.1),
        json!(9007199254740992u64),
        json!(18446744073709551615u64),
        json!(1e20),
        json!("100"),
        json!(true),
        json!([1]),
        json!({"amount": 1}),
    ];
    for field in ["price", "stock"] {
        for v in &bad {
            let mut body = json!({"name": "Widget", "sku": "W-1", "price": 10, "stock": 10});
            body[field] = v.clone();
            let res = s.call(Method::POST, "/v1/products", &t, Some(body)).await;
            let issue = expect_one_issue(res, field).await;
            assert!(!issue.is_empty(), "{field}={v}");
        }
    }
    assert_eq!(
        list(&s, &t, "").await["meta"]["total"],
        0,
        "nothing created"
    );

    // The bounds themselves are fine.
    let p = create(&s, &t, "Zero", "Z-0", 0, 0).await;
    assert_eq!(
        (p["price"].clone(), p["stock"].clone()),
        (json!(0), json!(0))
    );
    let p = create(&s, &t, "Max", "M-1", 9007199254740991, 9007199254740991).await;
    assert_eq!(p["price"], 9007199254740991i64);
    assert_eq!(p["stock"], 9007199254740991i64);

    // PATCH uses the same rules.
    let id = id_of(&p);
    for field in ["price", "stock"] {
        for v in [
            json!(-1),
            json!(1.5),
            json!(9007199254740992u64),
            json!("5"),
        ] {
            let mut body = json!({});
            body[field] = v.clone();
            let res = patch(&s, &t, &id, body).await;
            expect_one_issue(res, field).await;
        }
    }
    assert_eq!(get(&s, &t, &id).await, p, "nothing changed");
}

// D6: every problem of the body at once; missing fields; unknown fields.
#[tokio::test]
async fn d6_create_reports_all_problems_at_once() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let res = s
        .call(Method::POST, "/v1/products", &t, Some(json!({})))
        .await;
    expect_issues(res, &["name", "sku", "price", "stock"]).await;
    let res = s
        .call(
            Method::POST,
            "/v1/products",
            &t,
            Some(json!({"name": "", "sku": "a b", "price": -1, "stock": "x", "status": "available", "color": "red"})),
        )
        .await;
    let body = expect_issues(res, &["name", "sku", "price", "stock", "status", "color"]).await;
    for (f, issue) in details(&body) {
        assert!(!issue.is_empty(), "{f}");
    }
    let res = s
        .call(
            Method::POST,
            "/v1/products",
            &t,
            Some(json!({"name": "A", "sku": "A-1", "price": 1, "stock": 1, "id": "prod_mine"})),
        )
        .await;
    expect_one_issue(res, "id").await;
    let res = s
        .call(
            Method::POST,
            "/v1/products",
            &t,
            Some(json!({"name": "A", "sku": "A-1", "price": 1})),
        )
        .await;
    expect_one_issue(res, "stock").await;
    assert_eq!(list(&s, &t, "").await["meta"]["total"], 0);
}

// D8: name 1–200 characters after trimming, no control characters.
#[tokio::test]
async fn d8_product_name_rules() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let long = "n".repeat(201);
    for bad in ["", "  ", long.as_str(), "tab\tinside", "bell\u{7}"] {
        let res = s
            .call(
                Method::POST,
                "/v1/products",
                &t,
                Some(json!({"name": bad, "sku": "N-1", "price": 1, "stock": 1})),
            )
            .await;
        expect_one_issue(res, "name").await;
    }
    let p = create(&s, &t, &"ü".repeat(200), "N-1", 1, 1).await;
    assert_eq!(p["name"].as_str().unwrap().chars().count(), 200);
}

// D8: sku is 1–64 of A-Z a-z 0-9 - _ .
#[tokio::test]
async fn d8_sku_charset_and_length() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let long = "A".repeat(65);
    for bad in [
        "",
        "a b",
        "abc/def",
        "caf\u{e9}",
        "a+b",
        "a*",
        "a,b",
        "#1",
        " A-1",
        "A-1 ",
        long.as_str(),
    ] {
        let res = s
            .call(
                Method::POST,
                "/v1/products",
                &t,
                Some(json!({"name": "P", "sku": bad, "price": 1, "stock": 1})),
            )
            .await;
        expect_one_issue(res, "sku").await;
    }
    let res = s
        .call(
            Method::POST,
            "/v1/products",
            &t,
            Some(json!({"name": "P", "sku": 12345, "price": 1, "stock": 1})),
        )
        .await;
    expect_one_issue(res, "sku").await;
    assert_eq!(list(&s, &t, "").await["meta"]["total"], 0);

    let max = format!("{}-_.Z", "Az09".repeat(15)); // 64 characters
    assert_eq!(max.len(), 64);
    let p = create(&s, &t, "Max", &max, 1, 1).await;
    assert_eq!(p["sku"], max);
    let p = create(&s, &t, "Single", "x", 1, 1).await;
    assert_eq!(p["sku"], "x");
    let p = create(&s, &t, "Mixed", "JEANS-BLUE_1.0", 1, 1).await;
    assert_eq!(p["sku"], "JEANS-BLUE_1.0");
    // PATCH too
    let res = patch(&s, &t, &id_of(&p), json!({"sku": "no spaces"})).await;
    expect_one_issue(res, "sku").await;
}

// D16, D2: duplicate sku in the organization is 409, case-insensitively; fine across organizations.
#[tokio::test]
async fn d16_duplicate_sku_is_409_case_insensitive_and_per_org() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let first = create(&s, &t, "First", "ABC-1", 100, 1).await;
    for dup in ["ABC-1", "abc-1", "Abc-1"] {
        let res = s
            .call(
                Method::POST,
                "/v1/products",
                &t,
                Some(json!({"name": "Second", "sku": dup, "price": 5, "stock": 5})),
            )
            .await;
        let body = expect_error(res, StatusCode::CONFLICT, "DUPLICATE_RESOURCE").await;
        assert_eq!(body["error"]["details"], json!([]));
    }
    assert_eq!(list(&s, &t, "").await["meta"]["total"], 1);

    // Another organization has its own catalog.
    let (_, tb) = other_org(&s, RW).await;
    let b = create(&s, &tb, "Theirs", "abc-1", 1, 1).await;
    assert_ne!(b["id"], first["id"]);

    // PATCH to another product's sku is a duplicate too, and changes nothing.
    let second = create(&s, &t, "Second", "XYZ-9", 5, 5).await;
    let res = patch(
        &s,
        &t,
        &id_of(&second),
        json!({"sku": "abc-1", "name": "Renamed"}),
    )
    .await;
    expect_error(res, StatusCode::CONFLICT, "DUPLICATE_RESOURCE").await;
    assert_eq!(get(&s, &t, &id_of(&second)).await, second);

    // A product may keep (or re-case) its own sku.
    let p = patch_ok(
        &s,
        &t,
        &id_of(&first),
        json!({"sku": "ABC-1", "price": 101}),
    )
    .await;
    assert_eq!(p["price"], 101);
    let p = patch_ok(&s, &t, &id_of(&first), json!({"sku": "abc-1"})).await;
    assert_eq!(p["sku"], "abc-1");

    // After a delete the sku is free again.
    let res = s
        .call(
            Method::DELETE,
            &format!("/v1/products/{}", id_of(&first)),
            &t,
            None,
        )
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    create(&s, &t, "Third", "ABC-1", 1, 1).await;
}

// ---------------------------------------------------------------------------
// D18 status
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d18_status_follows_stock_at_creation() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    assert_eq!(
        create(&s, &t, "None", "S-0", 1, 0).await["status"],
        "out_of_stock"
    );
    assert_eq!(
        create(&s, &t, "Some", "S-5", 1, 5).await["status"],
        "available"
    );
    assert_eq!(
        create(&s, &t, "One", "S-1", 1, 1).await["status"],
        "available"
    );
    // D16: discontinued may be chosen at creation, whatever the stock.
    let d = create_with(
        &s,
        &t,
        json!({"name": "Old", "sku": "OLD-5", "price": 1, "stock": 5, "status": "discontinued"}),
    )
    .await;
    assert_eq!(d["status"], "discontinued");
    assert_eq!(d["stock"], 5);
    let d = create_with(
        &s,
        &t,
        json!({"name": "Older", "sku": "OLD-0", "price": 1, "stock": 0, "status": "discontinued"}),
    )
    .await;
    assert_eq!(d["status"], "discontinued");
    assert_eq!(get(&s, &t, &id_of(&d)).await["status"], "discontinued");
}

// D16, D18: only `discontinued` may be given at creation.
#[tokio::test]
async fn d18_create_with_other_status_is_400() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    for (status, stock) in [
        (json!("available"), 5),
        (json!("available"), 0),
        (json!("out_of_stock"), 0),
        (json!("bogus"), 1),
        (json!("DISCONTINUED"), 1),
        (json!(1), 1),
    ] {
        let res = s
            .call(Method::POST, "/v1/products", &t, Some(json!({"name": "P", "sku": "P-1", "price": 1, "stock": stock, "status": status})))
            .await;
        expect_one_issue(res, "status").await;
    }
    assert_eq!(list(&s, &t, "").await["meta"]["total"], 0);
}

// D18: every write of stock moves the status, unless discontinued.
#[tokio::test]
async fn d18_patch_of_stock_moves_status() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let p = create(&s, &t, "Shirt", "SH-1", 100, 5).await;
    let id = id_of(&p);
    let p = patch_ok(&s, &t, &id, json!({"stock": 0})).await;
    assert_eq!(
        (p["stock"].clone(), p["status"].clone()),
        (json!(0), json!("out_of_stock"))
    );
    assert_eq!(get(&s, &t, &id).await["status"], "out_of_stock");
    let p = patch_ok(&s, &t, &id, json!({"stock": 3})).await;
    assert_eq!(
        (p["stock"].clone(), p["status"].clone()),
        (json!(3), json!("available"))
    );
    let p = patch_ok(&s, &t, &id, json!({"stock": 7, "price": 150})).await;
    assert_eq!(p["status"], "available");
    // A status that agrees with the new stock may be given alongside it.
    let p = patch_ok(&s, &t, &id, json!({"stock": 0, "status": "out_of_stock"})).await;
    assert_eq!(p["status"], "out_of_stock");
    let p = patch_ok(&s, &t, &id, json!({"stock": 2, "status": "available"})).await;
    assert_eq!(p["status"], "available");
    // Agreeing with the current stock is fine (and changes nothing).
    let p = patch_ok(&s, &t, &id, json!({"status": "available"})).await;
    assert_eq!(
        (p["stock"].clone(), p["status"].clone()),
        (json!(2), json!("available"))
    );
}

// D18: discontinued from any state; it stays discontinued when stock changes.
#[tokio::test]
async fn d18_discontinued_from_any_state_and_sticky_on_stock_change() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let avail = create(&s, &t, "A", "A-1", 1, 5).await;
    let oos = create(&s, &t, "B", "B-1", 1, 0).await;
    for p in [&avail, &oos] {
        let id = id_of(p);
        let d = patch_ok(&s, &t, &id, json!({"status": "discontinued"})).await;
        assert_eq!(d["status"], "discontinued");
        assert_eq!(d["stock"], p["stock"], "stock untouched");
        // again: still fine
        assert_eq!(
            patch_ok(&s, &t, &id, json!({"status": "discontinued"})).await["status"],
            "discontinued"
        );
        for stock in [0, 10, 0] {
            let d = patch_ok(&s, &t, &id, json!({"stock": stock})).await;
            assert_eq!(d["stock"], stock);
            assert_eq!(d["status"], "discontinued", "stock {stock}");
        }
        assert_eq!(get(&s, &t, &id).await["status"], "discontinued");
    }
    // Discontinued together with a stock change in one PATCH.
    let c = create(&s, &t, "C", "C-1", 1, 4).await;
    let d = patch_ok(
        &s,
        &t,
        &id_of(&c),
        json!({"status": "discontinued", "stock": 9}),
    )
    .await;
    assert_eq!(
        (d["stock"].clone(), d["status"].clone()),
        (json!(9), json!("discontinued"))
    );
}

// D18: available / out_of_stock only where they agree with the stock (422 otherwise).
#[tokio::test]
async fn d18_status_must_agree_with_stock() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;

    let oos = create(&s, &t, "Empty", "E-1", 1, 0).await;
    let res = patch(&s, &t, &id_of(&oos), json!({"status": "available"})).await;
    let body = expect_error(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "INVALID_STATE_TRANSITION",
    )
    .await;
    assert_eq!(body["error"]["details"], json!([]));
    assert_eq!(get(&s, &t, &id_of(&oos)).await, oos);

    let avail = create(&s, &t, "Full", "F-1", 1, 5).await;
    let res = patch(&s, &t, &id_of(&avail), json!({"status": "out_of_stock"})).await;
    expect_error(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "INVALID_STATE_TRANSITION",
    )
    .await;
    // the stock written in the same request is what counts
    let res = patch(
        &s,
        &t,
        &id_of(&avail),
        json!({"status": "available", "stock": 0}),
    )
    .await;
    expect_error(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "INVALID_STATE_TRANSITION",
    )
    .await;
    let res = patch(
        &s,
        &t,
        &id_of(&oos),
        json!({"status": "out_of_stock", "stock": 3}),
    )
    .await;
    expect_error(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "INVALID_STATE_TRANSITION",
    )
    .await;
    assert_eq!(get(&s, &t, &id_of(&avail)).await, avail, "all-or-nothing");
    assert_eq!(get(&s, &t, &id_of(&oos)).await, oos, "all-or-nothing");

    // A discontinued product with no stock cannot become available...
    let d0 = create_with(
        &s,
        &t,
        json!({"name": "Gone", "sku": "G-0", "price": 1, "stock": 0, "status": "discontinued"}),
    )
    .await;
    let res = patch(&s, &t, &id_of(&d0), json!({"status": "available"})).await;
    expect_error(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "INVALID_STATE_TRANSITION",
    )
    .await;
    assert_eq!(get(&s, &t, &id_of(&d0)).await["status"], "discontinued");
    // ...but can return as out_of_stock, or as available together with stock.
    let d0b = create_with(
        &s,
        &t,
        json!({"name": "Gone B", "sku": "G-0B", "price": 1, "stock": 0, "status": "discontinued"}),
    )
    .await;
    assert_eq!(
        patch_ok(&s, &t, &id_of(&d0b), json!({"status": "out_of_stock"})).await["status"],
        "out_of_stock"
    );
    let p = patch_ok(
        &s,
        &t,
        &id_of(&d0),
        json!({"status": "available", "stock": 4}),
    )
    .await;
    assert_eq!(
        (p["stock"].clone(), p["status"].clone()),
        (json!(4), json!("available"))
    );
    // Returned to sale, the status follows the stock again.
    assert_eq!(
        patch_ok(&s, &t, &id_of(&d0), json!({"stock": 0})).await["status"],
        "out_of_stock"
    );

    // D18: discontinued with stock > 0 → available.
    let d5 = create_with(
        &s,
        &t,
        json!({"name": "Back", "sku": "BK-5", "price": 1, "stock": 5, "status": "discontinued"}),
    )
    .await;
    let res = patch(&s, &t, &id_of(&d5), json!({"status": "out_of_stock"})).await;
    expect_error(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "INVALID_STATE_TRANSITION",
    )
    .await;
    let p = patch_ok(&s, &t, &id_of(&d5), json!({"status": "available"})).await;
    assert_eq!(
        (p["stock"].clone(), p["status"].clone()),
        (json!(5), json!("available"))
    );

    // An unknown status is a 400, not a 422.
    for bad in [json!("sold_out"), json!("AVAILABLE"), json!(3)] {
        let res = patch(&s, &t, &id_of(&avail), json!({"status": bad})).await;
        expect_one_issue(res, "status").await;
    }
}

// ---------------------------------------------------------------------------
// PATCH (D9 all-or-nothing)
// ---------------------------------------------------------------------------

#[tokio::test]
async fn patch_changes_only_supplied_fields() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let p = create(&s, &t, "Mug", "MUG-1", 500, 3).await;
    let id = id_of(&p);
    let q = patch_ok(&s, &t, &id, json!({"name": "Big Mug"})).await;
    assert_eq!(q["name"], "Big Mug");
    for k in ["id", "sku", "price", "stock", "status", "created_at"] {
        assert_eq!(q[k], p[k], "{k} unchanged");
    }
    let q = patch_ok(&s, &t, &id, json!({"sku": "MUG-2", "price": 650})).await;
    assert_eq!(
        (q["name"].clone(), q["sku"].clone(), q["price"].clone()),
        (json!("Big Mug"), json!("MUG-2"), json!(650))
    );
    assert_eq!(q["created_at"], p["created_at"], "created_at never moves");
    assert_eq!(get(&s, &t, &id).await, q);
    let same = patch_ok(&s, &t, &id, json!({})).await;
    assert_eq!(same, q);
}

// D9: a PATCH is all-or-nothing; D12-like unknown fields refused.
#[tokio::test]
async fn d9_product_patch_is_all_or_nothing() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let p = create(&s, &t, "Lamp", "LAMP-1", 2500, 0).await;
    let id = id_of(&p);
    let res = patch(&s, &t, &id, json!({"name": "Changed", "price": -1})).await;
    expect_one_issue(res, "price").await;
    let res = patch(
        &s,
        &t,
        &id,
        json!({"name": "Changed", "stock": 5, "sku": "bad sku"}),
    )
    .await;
    expect_one_issue(res, "sku").await;
    let res = patch(&s, &t, &id, json!({"name": "Changed", "weight": 3})).await;
    expect_one_issue(res, "weight").await;
    let res = patch(
        &s,
        &t,
        &id,
        json!({"name": "", "price": "x", "stock": -3, "status": "nope"}),
    )
    .await;
    expect_issues(res, &["name", "price", "stock", "status"]).await;
    let res = patch(
        &s,
        &t,
        &id,
        json!({"name": "Changed", "status": "available"}),
    )
    .await;
    expect_error(
        res,
        StatusCode::UNPROCESSABLE_ENTITY,
        "INVALID_STATE_TRANSITION",
    )
    .await;
    create(&s, &t, "Other", "OTHER-1", 1, 1).await;
    let res = patch(
        &s,
        &t,
        &id,
        json!({"name": "Changed", "stock": 4, "sku": "other-1"}),
    )
    .await;
    expect_error(res, StatusCode::CONFLICT, "DUPLICATE_RESOURCE").await;
    assert_eq!(get(&s, &t, &id).await, p, "nothing changed");
}

// D9: 413/415/400 before 404.
#[tokio::test]
async fn d9_bad_request_before_unknown_product() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    for path in ["/v1/products/prod_unknownunknown", "/v1/products/usr_1"] {
        let res = s
            .call(Method::PATCH, path, &t, Some(json!({"price": -5})))
            .await;
        expect_one_issue(res, "price").await;
        let res = s
            .request(Method::PATCH, path)
            .bearer_auth(&t)
            .header("content-type", "application/json")
            .body("[")
            .send()
            .await
            .unwrap();
        expect_one_issue(res, "body").await;
        let res = s
            .request(Method::PATCH, path)
            .bearer_auth(&t)
            .header("content-type", "text/plain")
            .body("{}")
            .send()
            .await
            .unwrap();
        expect_error(
            res,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UNSUPPORTED_MEDIA_TYPE",
        )
        .await;
        let res = s
            .call(
                Method::PATCH,
                path,
                &t,
                Some(json!({"name": "n".repeat(70 * 1024)})),
            )
            .await;
        expect_error(res, StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE").await;
        let res = s
            .call(Method::PATCH, path, &t, Some(json!({"price": 5})))
            .await;
        expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    }
}

// D6, D8, D9: body transport rules on products as on users.
#[tokio::test]
async fn d6_product_body_media_type_size_and_syntax() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let good = r#"{"name": "Pen", "sku": "PEN-1", "price": 120, "stock": 40}"#;
    for ct in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let mut rb = s
            .request(Method::POST, "/v1/products")
            .bearer_auth(&t)
            .body(good);
        if let Some(ct) = ct {
            rb = rb.header("content-type", ct);
        }
        expect_error(
            rb.send().await.unwrap(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UNSUPPORTED_MEDIA_TYPE",
        )
        .await;
    }
    let res = s
        .request(Method::POST, "/v1/products")
        .bearer_auth(&t)
        .header("content-type", "application/json")
        .body("{\"name\": ")
        .send()
        .await
        .unwrap();
    expect_one_issue(res, "body").await;
    let res = s
        .call(
            Method::POST,
            "/v1/products",
            &t,
            Some(json!({"name": "x".repeat(65 * 1024), "sku": "BIG", "price": 1, "stock": 1})),
        )
        .await;
    expect_error(res, StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE").await;
    assert_eq!(list(&s, &t, "").await["meta"]["total"], 0);

    let res = s
        .request(Method::POST, "/v1/products")
        .bearer_auth(&t)
        .header("content-type", "application/json; charset=utf-8")
        .body(good)
        .send()
        .await
        .unwrap();
    let p = body_of(res, StatusCode::CREATED).await["data"].clone();
    let res = s
        .request(Method::PATCH, &format!("/v1/products/{}", id_of(&p)))
        .bearer_auth(&t)
        .header("content-type", "application/json; charset=utf-8")
        .body(r#"{"stock": 0}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(
        body_of(res, StatusCode::OK).await["data"]["status"],
        "out_of_stock"
    );
    let res = s
        .request(Method::PATCH, &format!("/v1/products/{}", id_of(&p)))
        .bearer_auth(&t)
        .header("content-type", "text/plain")
        .body(r#"{"stock": 9}"#)
        .send()
        .await
        .unwrap();
    expect_error(
        res,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "UNSUPPORTED_MEDIA_TYPE",
    )
    .await;
    assert_eq!(get(&s, &t, &id_of(&p)).await["stock"], 0);
}

// ---------------------------------------------------------------------------
// D17 search, listing, filters, paging
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d17_search_is_word_prefix_based() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let blue_shirt = id_of(&create(&s, &t, "Blue Shirt", "BS-001", 1999, 3).await);
    pause().await;
    let blue_jeans = id_of(&create(&s, &t, "Blue Jeans", "JEANS-BLUE-1", 4999, 0).await);
    pause().await;
    let red_shirt = id_of(&create(&s, &t, "Red Shirt", "RS-001", 1999, 2).await);
    pause().await;
    let shoe_horn = id_of(&create(&s, &t, "Shoe Horn", "SH-9", 499, 1).await);

    assert_eq!(
        found(&s, &t, "blue%20sh").await,
        std::slice::from_ref(&blue_shirt),
        "q=blue sh"
    );
    assert_eq!(
        found(&s, &t, "jeans-blue").await,
        std::slice::from_ref(&blue_jeans),
        "q=jeans-blue"
    );
    assert_eq!(
        found(&s, &t, "JEANS-BLUE-1").await,
        std::slice::from_ref(&blue_jeans)
    );
    assert_eq!(
        found(&s, &t, "blue").await,
        [blue_jeans.clone(), blue_shirt.clone()],
        "newest first"
    );
    assert_eq!(
        found(&s, &t, "BLUE").await,
        [blue_jeans.clone(), blue_shirt.clone()],
        "case-insensitive"
    );
    assert_eq!(
        found(&s, &t, "bLuE%20ShIrT").await,
        std::slice::from_ref(&blue_shirt)
    );
    assert_eq!(
        found(&s, &t, "sh").await,
        [shoe_horn.clone(), red_shirt.clone(), blue_shirt.clone()]
    );
    assert_eq!(
        found(&s, &t, "shirt").await,
        [red_shirt.clone(), blue_shirt.clone()]
    );
    assert_eq!(
        found(&s, &t, "shirt%20blue").await,
        std::slice::from_ref(&blue_shirt),
        "word order does not matter"
    );
    assert_eq!(
        found(&s, &t, "bs").await,
        std::slice::from_ref(&blue_shirt),
        "sku words"
    );
    assert_eq!(
        found(&s, &t, "001").await,
        [red_shirt.clone(), blue_shirt.clone()],
        "digit words"
    );
    assert_eq!(
        found(&s, &t, "blue-shirt!!").await,
        std::slice::from_ref(&blue_shirt),
        "punctuation separates words"
    );
    assert_eq!(
        found(&s, &t, "%20%20blue%20%20%20shirt%20").await,
        std::slice::from_ref(&blue_shirt)
    );
    // prefixes of words, not substrings
    assert_eq!(found(&s, &t, "hirt").await, Vec::<String>::new());
    assert_eq!(found(&s, &t, "lue").await, Vec::<String>::new());
    assert_eq!(found(&s, &t, "eans").await, Vec::<String>::new());
    // every word must match
    assert_eq!(found(&s, &t, "blue%20red").await, Vec::<String>::new());
    assert_eq!(
        found(&s, &t, "red%20sh").await,
        std::slice::from_ref(&red_shirt)
    );
    assert_eq!(found(&s, &t, "shirts").await, Vec::<String>::new());
}

// D17: words are runs of letters and digits, case-insensitive beyond ASCII;
// search syntax in q is plain text.
#[tokio::test]
async fn d17_search_words_unicode_and_operators_are_text() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let creme = id_of(&create(&s, &t, "Crème Brûlée", "DESSERT-7", 800, 5).await);
    pause().await;
    let model = id_of(&create(&s, &t, "Model ABC123", "MDL_3000X.v2", 100, 1).await);
    pause().await;
    let mix = id_of(&create(&s, &t, "Blue Orange Red", "MIX-1", 1, 1).await);
    pause().await;
    let note = id_of(&create(&s, &t, "Notebook and Pen", "NB-1", 1, 1).await);

    assert_eq!(
        found(&s, &t, "CR%C3%88ME").await,
        std::slice::from_ref(&creme),
        "q=CRÈME"
    );
    assert_eq!(
        found(&s, &t, "br%C3%BB").await,
        std::slice::from_ref(&creme),
        "q=brû"
    );
    assert_eq!(
        found(&s, &t, "BR%C3%9BL%C3%89E").await,
        std::slice::from_ref(&creme),
        "q=BRÛLÉE"
    );
    assert_eq!(found(&s, &t, "abc").await, std::slice::from_ref(&model));
    assert_eq!(
        found(&s, &t, "123").await,
        Vec::<String>::new(),
        "ABC123 is one word"
    );
    assert_eq!(
        found(&s, &t, "3000").await,
        std::slice::from_ref(&model),
        "sku MDL_3000X: '_' separates words"
    );
    assert_eq!(
        found(&s, &t, "mdl%203000x%20v2").await,
        std::slice::from_ref(&model)
    );
    assert_eq!(found(&s, &t, "v2").await, std::slice::from_ref(&model));
    // Operators of a search engine are words here.
    assert_eq!(
        found(&s, &t, "blue%20OR%20red").await,
        std::slice::from_ref(&mix)
    );
    assert_eq!(found(&s, &t, "blue%20OR").await, std::slice::from_ref(&mix));
    assert_eq!(
        found(&s, &t, "NOT").await,
        std::slice::from_ref(&note),
        "prefix of Notebook"
    );
    assert_eq!(found(&s, &t, "and").await, std::slice::from_ref(&note));
    assert_eq!(
        found(&s, &t, "AND%20pen").await,
        std::slice::from_ref(&note)
    );
    assert_eq!(
        found(&s, &t, "NEAR(blue%20red)").await,
        Vec::<String>::new(),
        "no word starts with near"
    );
    assert_eq!(
        found(&s, &t, "(blue%20red)").await,
        std::slice::from_ref(&mix)
    );
    assert_eq!(
        found(&s, &t, "%22blue%22%20%22red").await,
        std::slice::from_ref(&mix)
    );
    assert_eq!(found(&s, &t, "blue*").await, std::slice::from_ref(&mix));
    assert_eq!(found(&s, &t, "-blue").await, std::slice::from_ref(&mix));
    assert_eq!(
        found(&s, &t, "note%5E%3Anb").await,
        std::slice::from_ref(&note)
    );
}

// D17: results keep the list order (created_at desc, then id desc) and combine with status and paging.
#[tokio::test]
async fn d17_search_keeps_list_order_and_combines_with_filters() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let org = s.org();
    let at = Timestamp::now();
    let mut tied = Vec::new();
    for i in 0..5 {
        tied.push(
            store_product(&s, &org, &format!("Tea Cup {i}"), &format!("TC-{i}"), i, at)
                .await
                .id
                .to_string(),
        );
    }
    let older = store_product(
        &s,
        &org,
        "Tea Pot",
        "TP-1",
        0,
        Timestamp::from_millis(at.millis() - 5000),
    )
    .await
    .id
    .to_string();
    let newer = store_product(
        &s,
        &org,
        "Tea Towel",
        "TT-1",
        3,
        Timestamp::from_millis(at.millis() + 5000),
    )
    .await
    .id
    .to_string();
    store_product(&s, &org, "Coffee Cup", "CC-1", 3, at).await;

    tied.sort_by(|a, b| b.as_bytes().cmp(a.as_bytes()));
    let mut want = vec![newer.clone()];
    want.extend(tied.iter().cloned());
    want.push(older.clone());
    assert_eq!(found(&s, &t, "tea").await, want);

    let body = list(&s, &t, "?q=tea&limit=3&offset=2").await;
    assert_list_envelope(&body, 7, 3, 2);
    assert_eq!(ids(&body), want[2..5]);

    // status filter with q: stock 0 → out_of_stock: Tea Cup 0 and Tea Pot
    let body = list(&s, &t, "?q=tea&status=out_of_stock").await;
    assert_list_envelope(&body, 2, 20, 0);
    for p in body["data"].as_array().unwrap() {
        assert_eq!(p["status"], "out_of_stock");
        assert!(p["name"].as_str().unwrap().starts_with("Tea"));
    }
    let body = list(&s, &t, "?q=cup&status=available").await;
    assert_list_envelope(&body, 5, 20, 0); // Tea Cup 1..4 and Coffee Cup
    let body = list(&s, &t, "?q=tea&offset=50").await;
    assert_list_envelope(&body, 7, 20, 50);
    assert_eq!(body["data"], json!([]));
}

// D8: q at most 200 characters.
#[tokio::test]
async fn d8_product_q_over_200_characters_is_400() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let res = s
        .call(
            Method::GET,
            &format!("/v1/products?q={}", "b".repeat(201)),
            &t,
            None,
        )
        .await;
    expect_one_issue(res, "q").await;
    let body = list(&s, &t, &format!("?q={}", "b".repeat(200))).await;
    assert_list_envelope(&body, 0, 20, 0);
}

#[tokio::test]
async fn status_filter() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let a = id_of(&create(&s, &t, "Avail", "AV-1", 1, 3).await);
    let o = id_of(&create(&s, &t, "Out", "OUT-1", 1, 0).await);
    let d = id_of(&create_with(&s, &t, json!({"name": "Disc", "sku": "DI-1", "price": 1, "stock": 3, "status": "discontinued"})).await);
    for (status, want) in [
        ("available", &a),
        ("out_of_stock", &o),
        ("discontinued", &d),
    ] {
        let body = list(&s, &t, &format!("?status={status}")).await;
        assert_list_envelope(&body, 1, 20, 0);
        assert_eq!(ids(&body), std::slice::from_ref(want), "{status}");
    }
    // Status moves with stock, and the filter follows it.
    patch_ok(&s, &t, &a, json!({"stock": 0})).await;
    let body = list(&s, &t, "?status=out_of_stock").await;
    assert_list_envelope(&body, 2, 20, 0);
    let body = list(&s, &t, "?status=available").await;
    assert_list_envelope(&body, 0, 20, 0);
    for bad in ["bogus", "Available", "active", "pending_invite"] {
        let res = s
            .call(Method::GET, &format!("/v1/products?status={bad}"), &t, None)
            .await;
        expect_one_issue(res, "status").await;
    }
}

// D14 (list order), interface.md §4.2 paging on products.
#[tokio::test]
async fn products_paging_and_order() {
    let s = TestServer::start().await;
    let (org, t) = roomy_org(&s, RW).await;
    let base = Timestamp::now().millis() - 500_000;
    let mut made = Vec::new();
    for i in 0..105 {
        let p = store_product(
            &s,
            &org,
            &format!("Item {i}"),
            &format!("IT-{i}"),
            1,
            Timestamp::from_millis(base + i * 10),
        )
        .await;
        made.push(p.id.to_string());
    }
    made.reverse();

    let body = list(&s, &t, "").await;
    assert_list_envelope(&body, 105, 20, 0);
    assert_eq!(ids(&body), made[..20]);
    for p in body["data"].as_array().unwrap() {
        assert_timestamp(&p["created_at"]);
    }
    let body = list(&s, &t, "?limit=500").await;
    assert_list_envelope(&body, 105, 100, 0);
    assert_eq!(ids(&body), made[..100]);
    let body = list(&s, &t, "?limit=100&offset=100").await;
    assert_list_envelope(&body, 105, 100, 100);
    assert_eq!(ids(&body), made[100..]);
    let body = list(&s, &t, "?limit=7&offset=14").await;
    assert_list_envelope(&body, 105, 7, 14);
    assert_eq!(ids(&body), made[14..21]);
    let body = list(&s, &t, "?offset=105").await;
    assert_list_envelope(&body, 105, 20, 105);
    assert_eq!(body["data"], json!([]));
    let body = list(&s, &t, "?offset=1000000").await;
    assert_list_envelope(&body, 105, 20, 1000000);
    assert_eq!(body["data"], json!([]));

    for (q, field) in [
        ("limit=abc", "limit"),
        ("limit=0", "limit"),
        ("limit=-1", "limit"),
        ("offset=-1", "offset"),
        ("offset=x", "offset"),
    ] {
        let res = s
            .call(Method::GET, &format!("/v1/products?{q}"), &t, None)
            .await;
        expect_one_issue(res, field).await;
    }
    let res = s
        .call(
            Method::GET,
            "/v1/products?limit=0&offset=-1&status=gone",
            &t,
            None,
        )
        .await;
    expect_issues(res, &["limit", "offset", "status"]).await;
}

// ---------------------------------------------------------------------------
// D2 tenancy, delete, paths and methods
// ---------------------------------------------------------------------------

#[tokio::test]
async fn d2_product_of_another_org_is_404() {
    let s = TestServer::start().await;
    let ta = s.token(RW).await;
    let (_, tb) = other_org(&s, RW).await;
    let p = create(&s, &ta, "Secret Sauce", "SAUCE-1", 999, 9).await;
    let path = format!("/v1/products/{}", id_of(&p));

    let res = s.call(Method::GET, &path, &tb, None).await;
    let body_other = expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    let res = s
        .call(Method::PATCH, &path, &tb, Some(json!({"price": 1})))
        .await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    let res = s
        .call(
            Method::PATCH,
            &path,
            &tb,
            Some(json!({"status": "discontinued"})),
        )
        .await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    let res = s.call(Method::DELETE, &path, &tb, None).await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    let res = s
        .call(
            Method::GET,
            "/v1/products/prod_0000000000000000000000",
            &tb,
            None,
        )
        .await;
    let body_none = expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    assert_eq!(
        body_other["error"]["message"], body_none["error"]["message"],
        "indistinguishable from a missing id"
    );

    for q in ["", "?q=sauce", "?status=available", "?q=SAUCE-1"] {
        let body = list(&s, &tb, q).await;
        assert_list_envelope(&body, 0, 20, 0);
    }
    assert_eq!(get(&s, &ta, &id_of(&p)).await, p, "untouched");
    // And the reverse.
    create(&s, &tb, "Theirs", "T-1", 1, 1).await;
    assert_eq!(list(&s, &ta, "").await["meta"]["total"], 1);
}

#[tokio::test]
async fn delete_is_204_then_404() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let keep = create(&s, &t, "Keep", "K-1", 1, 1).await;
    let p = create(&s, &t, "Gone", "G-1", 1, 1).await;
    let path = format!("/v1/products/{}", id_of(&p));
    let res = s.call(Method::DELETE, &path, &t, None).await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    assert!(res.headers().contains_key("x-request-id"));
    assert!(res.bytes().await.unwrap().is_empty(), "204 has no body");
    let res = s.call(Method::GET, &path, &t, None).await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    let res = s.call(Method::DELETE, &path, &t, None).await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    let res = s
        .call(Method::PATCH, &path, &t, Some(json!({"stock": 1})))
        .await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    let body = list(&s, &t, "").await;
    assert_list_envelope(&body, 1, 20, 0);
    assert_eq!(ids(&body), [id_of(&keep)]);
    assert_eq!(
        found(&s, &t, "gone").await,
        Vec::<String>::new(),
        "gone from search too"
    );
}

// D6: wrong id shape is 404; unknown paths 404; wrong methods 405 with Allow.
#[tokio::test]
async fn d6_product_paths_ids_and_methods() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let p = create(&s, &t, "Thing", "TH-1", 1, 1).await;
    let path = format!("/v1/products/{}", id_of(&p));
    for bad in ["usr_1", "prod_", "prod_a-b", "prod_%2E%2E", "1", "PROD_abc"] {
        let res = s
            .call(Method::GET, &format!("/v1/products/{bad}"), &t, None)
            .await;
        expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
        let res = s
            .call(Method::DELETE, &format!("/v1/products/{bad}"), &t, None)
            .await;
        expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    }
    for unknown in [
        format!("{path}/stock"),
        "/v1/product".into(),
        "/v1/products/search".into(),
        "/v1/catalog".into(),
    ] {
        let res = s.call(Method::GET, &unknown, &t, None).await;
        expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    }
    let allow = |res: &Response| -> Vec<String> {
        let v = res
            .headers()
            .get("allow")
            .expect("405 carries Allow")
            .to_str()
            .unwrap();
        v.split(',')
            .map(|m| m.trim().to_ascii_uppercase())
            .collect()
    };
    for m in [Method::PUT, Method::DELETE, Method::PATCH] {
        let res = s.call(m.clone(), "/v1/products", &t, Some(json!({}))).await;
        let a = allow(&res);
        assert!(
            a.contains(&"GET".into()) && a.contains(&"POST".into()),
            "{m}: {a:?}"
        );
        expect_error(res, StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED").await;
    }
    for m in [Method::PUT, Method::POST] {
        let res = s
            .call(m.clone(), &path, &t, Some(json!({"name": "X"})))
            .await;
        let a = allow(&res);
        for want in ["GET", "PATCH", "DELETE"] {
            assert!(a.contains(&want.to_string()), "{m}: {a:?}");
        }
        expect_error(res, StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED").await;
    }
    assert_eq!(get(&s, &t, &id_of(&p)).await, p);
}

// D7 on products: request ids in the envelopes.
#[tokio::test]
async fn d7_products_request_id() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    let uuid = "0b6a4c1e-2f3d-4e5f-8a9b-1c2d3e4f5a6b";
    let res = s
        .request(Method::POST, "/v1/products")
        .bearer_auth(&t)
        .header("x-request-id", uuid)
        .json(&json!({"name": "R", "sku": "R-1", "price": 1, "stock": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["x-request-id"], uuid);
    let body = body_of(res, StatusCode::CREATED).await;
    assert_eq!(
        body["meta"]["request_id"],
        "req_0b6a4c1e2f3d4e5f8a9b1c2d3e4f5a6b"
    );
    let res = s
        .request(Method::GET, "/v1/products")
        .bearer_auth(&t)
        .header("x-request-id", uuid)
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["x-request-id"], uuid);
    let body = body_of(res, StatusCode::OK).await;
    assert_eq!(
        body["meta"]["request_id"],
        "req_0b6a4c1e2f3d4e5f8a9b1c2d3e4f5a6b"
    );
}

// D22: the `admin` scope satisfies products:read and products:write.
#[tokio::test]
async fn d22_admin_scope_satisfies_product_scopes() {
    let s = TestServer::start().await;
    let admin = s.token("admin").await;
    let p = create(&s, &admin, "Admin Thing", "AT-1", 1, 1).await;
    let id = id_of(&p);
    assert_eq!(get(&s, &admin, &id).await, p);
    assert_eq!(list(&s, &admin, "").await["meta"]["total"], 1);
    assert_eq!(
        patch_ok(&s, &admin, &id, json!({"stock": 0})).await["status"],
        "out_of_stock"
    );
    let res = s
        .call(Method::DELETE, &format!("/v1/products/{id}"), &admin, None)
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
}

// D6 (continued): a `q` containing a control character matches nothing, an
// empty page with `total: 0`, on every backend — not the whole list, though
// product search otherwise reads only the words of `q` (D17).
#[tokio::test]
async fn d6_q_with_a_control_character_is_an_empty_page() {
    let s = TestServer::start().await;
    let t = s.token(RW).await;
    create(&s, &t, "Blue shirt", "BLUE-1", 100, 1).await;
    for q in [
        "%01",
        "%09",
        "%7F",
        "%00",
        "blue%01",
        "blue%09shirt",
        "shirt%7F",
        "%00blue",
    ] {
        let body = list(&s, &t, &format!("?q={q}")).await;
        assert_list_envelope(&body, 0, 20, 0);
        assert_eq!(body["data"], json!([]), "q={q}: {body}");
    }
    assert_eq!(found(&s, &t, "blue%20shirt").await.len(), 1);
}
