//! `/v1/events` (D54): what a committed change tells, on both backends.
//! The cascades of offboarding are in `offboarding` (its helpers); every
//! event seen here is checked against the OpenAPI document's `webhooks`
//! schema of its type (D35 continued).

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{TestServer, details, expect_error};
use crate::users::{body_of, roomy_org};

const SCOPES: &str = "products:read products:write events:read";

async fn events(s: &TestServer, t: &str, query: &str) -> Value {
    let res = s
        .call(Method::GET, &format!("/v1/events{query}"), t, None)
        .await;
    body_of(res, StatusCode::OK).await
}

/// D35 continued: each of `events` is valid against the schema the served
/// OpenAPI document's `webhooks` map gives its type.
pub(crate) async fn assert_valid_events(s: &TestServer, events: &[Value]) {
    let doc: Value = s
        .request(Method::GET, "/v1/openapi.json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for e in events {
        let kind = e["type"].as_str().expect("an event has a type");
        let item = &doc["webhooks"][kind]["post"];
        let mut schema = item["requestBody"]["content"]["application/json"]["schema"].clone();
        assert!(schema.is_object(), "no webhook schema for {kind}");
        // The schema's references point into the document's components.
        schema["components"] = doc["components"].clone();
        let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
        let problems: Vec<String> = validator.iter_errors(e).map(|p| p.to_string()).collect();
        assert!(problems.is_empty(), "{kind} {e}: {problems:?}");
    }
}

/// Every event `t` reads after `sequence`, oldest first, page by page with
/// the catch-up cursor.
pub(crate) async fn all_after(s: &TestServer, t: &str, sequence: i64) -> Vec<Value> {
    let mut out = Vec::new();
    let mut after = sequence;
    loop {
        let page = events(s, t, &format!("?after_sequence={after}&limit=100")).await["data"]
            .as_array()
            .unwrap()
            .clone();
        let Some(last) = page.last() else {
            return out;
        };
        after = last["sequence"].as_i64().unwrap();
        out.extend(page);
    }
}

/// The events of the server's organization that `query` selects (newest
/// first), each checked against its webhook schema.
pub(crate) async fn told(s: &TestServer, query: &str) -> Vec<Value> {
    let t = s.token("events:read").await;
    let list = events(s, &t, query).await["data"]
        .as_array()
        .unwrap()
        .clone();
    assert_valid_events(s, &list).await;
    list
}

fn seqs(body: &Value) -> Vec<i64> {
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["sequence"].as_i64().unwrap())
        .collect()
}

fn types(body: &Value) -> Vec<String> {
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn d54_product_changes_are_told_as_their_get_shows_them() {
    // These count the writes' events exactly: without D58's audit
    // checkpoints, whose `audit.checkpoint` comes when the sealer first
    // reaches a chain, at a moment no test can fix.
    let s = TestServer::start_with(|c| c.audit.checkpoints = false).await;
    let (org, t) = roomy_org(&s, SCOPES).await;

    // Created with an Idempotency-Key; its replay tells nothing more.
    let create = || {
        s.request(Method::POST, "/v1/products")
            .bearer_auth(&t)
            .header("idempotency-key", "evt-test-1")
            .json(&json!({"name": "Lamp", "sku": "LAMP-1", "price": 1999, "stock": 0}))
    };
    let res = create().send().await.unwrap();
    let body = body_of(res, StatusCode::CREATED).await;
    let (created, request_id) = (body["data"].clone(), body["meta"]["request_id"].clone());
    let id = created["id"].as_str().unwrap().to_owned();
    let replay = create().send().await.unwrap();
    assert_eq!(replay.status(), StatusCode::CREATED);

    // D18: restocking changes the status in the same `product.updated`.
    let res = s
        .call(
            Method::PATCH,
            &format!("/v1/products/{id}"),
            &t,
            Some(json!({"stock": 5})),
        )
        .await;
    let restocked = body_of(res, StatusCode::OK).await["data"].clone();
    // A PATCH that changes nothing tells nothing.
    let res = s
        .call(
            Method::PATCH,
            &format!("/v1/products/{id}"),
            &t,
            Some(json!({"stock": 5})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let res = s
        .call(Method::DELETE, &format!("/v1/products/{id}"), &t, None)
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);

    // The harness made the organization's client first (sequence 1).
    let everything = events(&s, &t, "").await;
    assert_eq!(everything["meta"]["total"], 4, "{everything}");
    assert_eq!(everything["data"][3]["type"], "application.created");
    assert_eq!(everything["data"][3]["actor"]["type"], "operator");
    let all = events(&s, &t, "?type=product.*").await;
    assert_eq!(all["meta"]["total"], 3, "{all}");
    assert_eq!(
        types(&all),
        ["product.deleted", "product.updated", "product.created"]
    );
    assert_eq!(seqs(&all), [4, 3, 2], "newest first, without gaps");

    let first = &all["data"][2];
    assert!(first["id"].as_str().unwrap().starts_with("evt_"));
    assert_eq!(first["org"], org.as_str());
    assert_eq!(first["api_version"], "1.2.0");
    assert_eq!(
        first["data"]["object"], created,
        "the object as its GET showed it"
    );
    assert!(
        first["data"].get("previous_attributes").is_none(),
        "{first}"
    );
    assert_eq!(first["created_at"], created["created_at"]);
    let client = first["actor"]["id"].as_str().unwrap();
    assert!(client.starts_with("app_"), "{first}");
    assert_eq!(
        first["actor"],
        json!({"type": "client", "id": client, "client_id": client})
    );
    assert_eq!(
        first["request"],
        json!({"id": request_id, "idempotency_key": "evt-test-1"})
    );

    let updated = &all["data"][1];
    assert_eq!(updated["data"]["object"], restocked);
    assert_eq!(
        updated["data"]["previous_attributes"],
        json!({"stock": 0, "status": "out_of_stock"})
    );
    assert_eq!(
        updated["request"]["idempotency_key"],
        Value::Null,
        "a PATCH has none"
    );
    let deleted = &all["data"][0];
    assert_eq!(
        deleted["data"]["object"], restocked,
        "a deletion tells the last state"
    );

    // The catch-up cursor: oldest first from N+1; `total` counts after N.
    let after = events(&s, &t, "?after_sequence=2").await;
    assert_eq!(seqs(&after), [3, 4]);
    assert_eq!(after["meta"]["total"], 2);
    let res = s
        .call(
            Method::GET,
            "/v1/events?after_sequence=1&offset=1",
            &t,
            None,
        )
        .await;
    let body = expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    assert_eq!(details(&body)[0].0, "offset", "{body}");

    // Filters: repeatable `type` with a trailing wildcard, `object_id`.
    let two = events(&s, &t, "?type=product.created&type=product.deleted").await;
    assert_eq!(seqs(&two), [4, 2]);
    assert_eq!(seqs(&events(&s, &t, "?type=product.*").await), [4, 3, 2]);
    assert_eq!(events(&s, &t, "?type=user.*").await["meta"]["total"], 0);
    assert_eq!(
        seqs(&events(&s, &t, &format!("?object_id={id}&limit=1")).await),
        [4]
    );
    let res = s
        .call(Method::GET, "/v1/events?type=prodcut.*", &t, None)
        .await;
    let body = expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    assert_eq!(details(&body)[0].0, "type", "{body}");

    // One event by id.
    let eid = updated["id"].as_str().unwrap();
    let res = s
        .call(Method::GET, &format!("/v1/events/{eid}"), &t, None)
        .await;
    assert_eq!(&body_of(res, StatusCode::OK).await["data"], updated);
    let res = s.call(Method::GET, "/v1/events/evt_nope", &t, None).await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
    let every = everything["data"].as_array().unwrap().clone();
    assert_valid_events(&s, &every).await;
}

#[tokio::test]
async fn d54_events_need_events_read_and_stay_in_their_organization() {
    // These count the writes' events exactly: without D58's audit
    // checkpoints, whose `audit.checkpoint` comes when the sealer first
    // reaches a chain, at a moment no test can fix.
    let s = TestServer::start_with(|c| c.audit.checkpoints = false).await;
    let (_, t) = roomy_org(&s, SCOPES).await;
    let res = s
        .call(
            Method::POST,
            "/v1/products",
            &t,
            Some(json!({"name": "Mug", "sku": "MUG", "price": 500, "stock": 1})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let mine = events(&s, &t, "").await;
    let eid = mine["data"][0]["id"].as_str().unwrap().to_owned();

    // Another organization sees none of them, not even by id (D2).
    let (_, other) = roomy_org(&s, SCOPES).await;
    let theirs = events(&s, &other, "").await;
    assert_eq!(types(&theirs), ["application.created"], "only their own");
    let res = s
        .call(Method::GET, &format!("/v1/events/{eid}"), &other, None)
        .await;
    expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;

    // D29 (continued): `events:read` is needed.
    let (_, no_scope) = roomy_org(&s, "products:read products:write").await;
    let res = s.call(Method::GET, "/v1/events", &no_scope, None).await;
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
}

/// D54, D40 (continued): events are purged after `GATEHOUSE_EVENT_RETENTION`
/// (here 2 s, which only `--test-settings` allows), then a 404.
#[tokio::test]
async fn d54_events_are_purged_after_a_short_retention_under_test_settings() {
    let s = TestServer::start_with(|c| {
        c.test_settings = true;
        c.event_retention_secs = 2;
    })
    .await;
    let (_, t) = roomy_org(&s, SCOPES).await;
    let res = s
        .call(
            Method::POST,
            "/v1/products",
            &t,
            Some(json!({"name": "Old", "sku": "OLD", "price": 1, "stock": 1})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let kept = events(&s, &t, "").await;
    let eid = kept["data"][0]["id"].as_str().unwrap().to_owned();
    // The housekeeping round purges every 5 s when a retention is this short.
    for _ in 0..60 {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        if events(&s, &t, "").await["meta"]["total"] == 0 {
            let res = s
                .call(Method::GET, &format!("/v1/events/{eid}"), &t, None)
                .await;
            expect_error(res, StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND").await;
            return;
        }
    }
    panic!("the event outlived its 2 s retention by 15 s");
}

/// D40 (continued): a retention outside 7–90 days stops the start with a
/// clear error, unless `--test-settings` lifts the minimum.
#[tokio::test]
async fn d40_an_event_retention_out_of_range_stops_the_start() {
    for (value, test) in [("3d", false), ("91d", true), ("soon", false)] {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"));
        for (k, _) in std::env::vars() {
            if k.starts_with("GATEHOUSE_") {
                cmd.env_remove(k);
            }
        }
        cmd.arg("--data-dir").arg(dir.path()).arg("serve");
        if test {
            cmd.arg("--test-settings");
        }
        let out = cmd
            .env("GATEHOUSE_EVENT_RETENTION", value)
            .stdin(std::process::Stdio::null())
            .output();
        let out = tokio::time::timeout(std::time::Duration::from_secs(30), out)
            .await
            .expect("it exits at once")
            .unwrap();
        assert!(!out.status.success(), "{value} refused");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("GATEHOUSE_EVENT_RETENTION"),
            "names the setting: {err}"
        );
        assert!(
            !dir.path().join("gatehouse.db").exists(),
            "nothing was created"
        );
    }
}

/// D54: `POST /v1/users` tells `user.created`, then `user.invited`, each
/// with the user as `GET /v1/users/{id}` shows it; re-sending the
/// invitation tells `user.invited` again.
#[tokio::test]
async fn d54_creating_and_reinviting_a_user_are_told() {
    // These count the writes' events exactly: without D58's audit
    // checkpoints, whose `audit.checkpoint` comes when the sealer first
    // reaches a chain, at a moment no test can fix.
    let s = TestServer::start_with(|c| c.audit.checkpoints = false).await;
    let (_, t) = roomy_org(&s, "users:read users:write events:read").await;
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &t,
            Some(json!({"email": "grace@example.com", "name": "Grace", "role": "editor"})),
        )
        .await;
    let created = body_of(res, StatusCode::CREATED).await["data"].clone();
    let id = created["id"].as_str().unwrap().to_owned();
    let res = s
        .call(
            Method::POST,
            &format!("/v1/users/{id}/invitation"),
            &t,
            None,
        )
        .await;
    assert!(res.status().is_success(), "{}", res.status());

    // After the harness's client (sequence 1).
    let all = events(&s, &t, "?after_sequence=1").await;
    assert_eq!(
        types(&all),
        ["user.created", "user.invited", "user.invited"]
    );
    assert_eq!(seqs(&all), [2, 3, 4]);
    for e in all["data"].as_array().unwrap() {
        assert_eq!(e["data"]["object"], created, "the user as its GET shows it");
        assert_eq!(e["actor"]["type"], "client");
    }
    let res = s
        .call(Method::GET, &format!("/v1/users/{id}"), &t, None)
        .await;
    assert_eq!(body_of(res, StatusCode::OK).await["data"], created);
}

/// D32 (continued): where `/v2` is enabled it serves events with cursors,
/// newest first; each page starts below the previous page's last event, so
/// events told meanwhile never shift a page; a cursor that is not an event
/// of the organization is 400; without the preview, 404.
#[tokio::test]
async fn d32_v2_serves_events_with_cursors() {
    // The pages count the writes' events: no audit checkpoints (D58's tell
    // their own `audit.checkpoint`, tested in audit.rs).
    let s = TestServer::start_with(|c| c.audit.checkpoints = false).await;
    let (org, t) = roomy_org(&s, SCOPES).await;
    let res = s.call(Method::GET, "/v2/events", &t, None).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    s.store().set_v2_preview(&org, true).await.unwrap();
    for i in 0..5 {
        let res = s
            .call(
                Method::POST,
                "/v1/products",
                &t,
                Some(json!({"name": format!("P{i}"), "sku": format!("V2-{i}"), "price": 1, "stock": 1})),
            )
            .await;
        assert_eq!(res.status(), StatusCode::CREATED);
    }
    let mut seen: Vec<i64> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v2/events?limit=2&starting_after={c}"),
            None => "/v2/events?limit=2".to_owned(),
        };
        let page = body_of(s.call(Method::GET, &path, &t, None).await, StatusCode::OK).await;
        pages += 1;
        seen.extend(seqs(&page));
        if pages == 1 {
            // Told after the first page: not on the later pages.
            let res = s
                .call(
                    Method::POST,
                    "/v1/products",
                    &t,
                    Some(json!({"name": "Late", "sku": "V2-LATE", "price": 1, "stock": 1})),
                )
                .await;
            assert_eq!(res.status(), StatusCode::CREATED);
        }
        match page["meta"]["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    // The harness's client (1) and the five products, newest first, each once.
    assert_eq!(seen, [6, 5, 4, 3, 2, 1]);
    assert_eq!(pages, 3);
    let filtered = body_of(
        s.call(Method::GET, "/v2/events?type=product.*&limit=100", &t, None)
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(seqs(&filtered), [7, 6, 5, 4, 3, 2]);
    let res = s
        .call(Method::GET, "/v2/events?starting_after=usr_abc", &t, None)
        .await;
    let body = expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    assert_eq!(details(&body)[0].0, "starting_after", "{body}");
    let (_, other) = crate::users::other_org(&s, SCOPES).await;
    let theirs = body_of(
        s.call(Method::GET, "/v1/events?limit=1", &other, None)
            .await,
        StatusCode::OK,
    )
    .await;
    let their_id = theirs["data"][0]["id"].as_str().unwrap().to_owned();
    let res = s
        .call(
            Method::GET,
            &format!("/v2/events?starting_after={their_id}"),
            &t,
            None,
        )
        .await;
    expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
}
