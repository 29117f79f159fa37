//! D58: the audit log on both backends: what a `/v1` write records (beside
//! its event, or, refused, in its own transaction), the filters and the
//! cursor, and the chain `gatehouse audit verify` recomputes, also after a
//! row was changed by hand.

use gatehouse_domain::Role;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::cli::gatehouse;
use crate::common::{TestServer, expect_error};
use crate::users::body_of;

const SCOPES: &str = "products:read products:write users:read users:write audit:read";

async fn audit(s: &TestServer, t: &str, query: &str) -> Value {
    let res = s
        .call(Method::GET, &format!("/v1/audit-logs{query}"), t, None)
        .await;
    body_of(res, StatusCode::OK).await
}

/// `audit(query)` once its `total` reaches `n`: entries are listed once
/// sealed, shortly after commit (D58); a read seals what committed before
/// it, but on PostgreSQL only what every older transaction of the cluster
/// has left behind, which under a loaded test run can take a moment.
pub(crate) async fn audit_once(s: &TestServer, t: &str, query: &str, n: u64) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let body = audit(s, t, query).await;
        if body["meta"]["total"].as_u64().unwrap() >= n || std::time::Instant::now() > deadline {
            return body;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The security chain's first hundred entries, oldest first, once
/// `action` has been recorded (`after_sequence=0`: the whole chain in
/// sequence order).
pub(crate) async fn security_chain(s: &TestServer, t: &str, action: &str) -> Value {
    audit_once(s, t, &format!("?action={action}"), 1).await;
    audit(s, t, "?category=security&after_sequence=0&limit=100").await
}

/// Runs `sql` by hand with the guard triggers out of the way, as someone
/// with database access could (SQLite drops `trigger`, PostgreSQL disables
/// the guard for the statement).
async fn past_the_guard(s: &TestServer, trigger: &str, sql: &str) -> Result<u64, String> {
    if s.settings.database_url.starts_with("postgres") {
        by_hand(
            s,
            "ALTER TABLE audit_entries DISABLE TRIGGER audit_entries_guard",
        )
        .await?;
        let done = by_hand(s, sql).await;
        by_hand(
            s,
            "ALTER TABLE audit_entries ENABLE TRIGGER audit_entries_guard",
        )
        .await?;
        done
    } else {
        by_hand(s, &format!("DROP TRIGGER {trigger}")).await?;
        by_hand(s, sql).await
    }
}

fn items(body: &Value) -> Vec<Value> {
    body["data"].as_array().unwrap().clone()
}

fn actions(body: &Value) -> Vec<String> {
    items(body)
        .iter()
        .map(|e| e["action"].as_str().unwrap().to_owned())
        .collect()
}

/// The admin chain, oldest first, through the cursor.
async fn admin_chain(s: &TestServer, t: &str) -> Vec<Value> {
    chain_of(s, t, "admin").await
}

/// A chain, oldest first, through the cursor.
async fn chain_of(s: &TestServer, t: &str, category: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let page = items(
            &audit(
                s,
                t,
                &format!("?category={category}&after_sequence={after}&limit=100"),
            )
            .await,
        );
        let Some(last) = page.last() else {
            return out;
        };
        after = last["sequence"].as_u64().unwrap();
        out.extend(page);
    }
}

async fn new_product(s: &TestServer, t: &str, name: &str, sku: &str) -> Value {
    let res = s
        .request(Method::POST, "/v1/products")
        .bearer_auth(t)
        .header("idempotency-key", format!("adt-{sku}"))
        .header("user-agent", "audit-test/1.0")
        .json(&json!({"name": name, "sku": sku, "price": 1999, "stock": 0}))
        .send()
        .await
        .unwrap();
    body_of(res, StatusCode::CREATED).await
}

#[tokio::test]
async fn d58_writes_and_refusals_are_recorded_with_actor_source_target_and_changes() {
    let s = TestServer::start().await;
    let t = s.token(SCOPES).await;
    let created = new_product(&s, &t, "Lamp", "LAMP-1").await;
    let product = created["data"]["id"].as_str().unwrap().to_owned();
    let request_id = created["meta"]["request_id"].clone();
    let res = s
        .call(
            Method::PATCH,
            &format!("/v1/products/{product}"),
            &t,
            Some(json!({"stock": 5})),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);

    // D13's LAST_ADMIN, refused: recorded as a failure with its code.
    let only = s.new_user(&s.org(), "only@example.com", Role::Admin).await;
    let res = s
        .call(Method::DELETE, &format!("/v1/users/{}", only.id), &t, None)
        .await;
    expect_error(res, StatusCode::UNPROCESSABLE_ENTITY, "LAST_ADMIN").await;
    // A 403 (the scope is missing) is recorded too, with its actor.
    let read_only = s.token("users:read").await;
    let res = s
        .call(
            Method::POST,
            "/v1/users",
            &read_only,
            Some(json!({"email": "x@example.com", "name": "X", "role": "viewer"})),
        )
        .await;
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;
    // A replay of the creation records nothing more (D50).
    let replay = new_product(&s, &t, "Lamp", "LAMP-1").await;
    assert_eq!(replay["data"]["id"], product.as_str());

    audit_once(&s, &t, "?outcome=failure", 2).await;
    let chain = admin_chain(&s, &t).await;
    let seqs: Vec<u64> = chain
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(
        seqs,
        (1..=chain.len() as u64).collect::<Vec<_>>(),
        "one gap-free sequence"
    );
    for e in &chain {
        assert_eq!(e["category"], "admin");
        assert!(e["id"].as_str().unwrap().starts_with("adt_"), "{e}");
        let hash = e["hash"].as_str().unwrap();
        assert!(
            hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()),
            "{e}"
        );
    }
    let of = |action: &str| -> Vec<&Value> {
        chain
            .iter()
            .filter(|e| e["action"] == action)
            .collect::<Vec<_>>()
    };
    let made = of("product.created");
    assert_eq!(made.len(), 1, "the replay records nothing: {chain:?}");
    let made = made[0];
    let client = made["actor"]["id"].as_str().unwrap();
    assert!(client.starts_with("app_"), "{made}");
    assert_eq!(
        made["actor"],
        json!({"type": "client", "id": client, "client_id": client})
    );
    assert_eq!(made["outcome"], "success");
    assert_eq!(made["reason"], Value::Null);
    assert_eq!(
        made["request"],
        json!({"id": request_id, "idempotency_key": "adt-LAMP-1"})
    );
    assert_eq!(
        made["source"],
        json!({"ip": "127.0.0.1", "user_agent": "audit-test/1.0"})
    );
    assert_eq!(made["target"], json!({"type": "product", "id": product}));
    assert_eq!(made["changes"]["name"], json!({"from": null, "to": "Lamp"}));
    assert_eq!(made["changes"]["stock"], json!({"from": null, "to": 0}));
    assert_eq!(made["details"], Value::Null);

    let updated = of("product.updated");
    assert_eq!(
        updated[0]["changes"],
        json!({
            "stock": {"from": 0, "to": 5},
            "status": {"from": "out_of_stock", "to": "available"},
        }),
        "only what changed, from and to"
    );

    let refused = of("user.deleted");
    assert_eq!(refused.len(), 1, "{chain:?}");
    assert_eq!(refused[0]["outcome"], "failure");
    assert_eq!(refused[0]["reason"], "LAST_ADMIN");
    assert_eq!(
        refused[0]["target"],
        json!({"type": "user", "id": only.id.as_str()})
    );
    assert_eq!(refused[0]["changes"], Value::Null);
    assert_eq!(refused[0]["actor"]["id"], client);
    let forbidden = of("user.created");
    let forbidden: Vec<_> = forbidden
        .iter()
        .filter(|e| e["outcome"] == "failure")
        .collect();
    assert_eq!(forbidden.len(), 1, "{chain:?}");
    assert_eq!(forbidden[0]["reason"], "INSUFFICIENT_SCOPE");
    assert_eq!(forbidden[0]["target"], Value::Null);

    // Filters: outcome, action prefix, target, actor, ip, category.
    let failures = audit(&s, &t, "?outcome=failure").await;
    let mut failed = actions(&failures);
    failed.sort();
    assert_eq!(failed, ["user.created", "user.deleted"]);
    assert_eq!(failures["meta"]["total"], 2);
    let products = audit(&s, &t, "?action=product.").await;
    assert_eq!(actions(&products), ["product.updated", "product.created"]);
    assert_eq!(
        audit(&s, &t, "?action=product.upd").await["meta"]["total"],
        1
    );
    let about = audit(&s, &t, &format!("?target={product}")).await;
    assert_eq!(about["meta"]["total"], 2);
    // Both refusals were the same client's (its two tokens), newest first.
    let by = audit(&s, &t, &format!("?actor={client}&outcome=failure")).await;
    assert_eq!(actions(&by), ["user.created", "user.deleted"]);
    assert_eq!(audit(&s, &t, "?actor=operator").await["meta"]["total"], 1);
    assert_eq!(
        audit(&s, &t, "?ip=127.0.0.1&action=product.").await["meta"]["total"],
        2
    );
    assert_eq!(audit(&s, &t, "?ip=10.9.8.7").await["meta"]["total"], 0);
    // The security chain holds only the clients' first tokens of the
    // period (D58's credential.used), nothing of these writes.
    let security = audit(&s, &t, "?category=security&limit=100").await;
    assert!(
        actions(&security).iter().all(|a| a == "credential.used"),
        "{security}"
    );
    // The cursor needs its chain; filters are checked.
    for bad in [
        "?after_sequence=0",
        "?category=everything",
        "?outcome=maybe",
        "?ip=not-an-address",
        "?from=yesterday",
        "?category=admin&after_sequence=0&offset=1",
        "?action=user.%00",
        "?target=%1Fx",
    ] {
        let res = s
            .call(Method::GET, &format!("/v1/audit-logs{bad}"), &t, None)
            .await;
        expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    }
    // audit:read is needed.
    let res = s
        .call(
            Method::GET,
            "/v1/audit-logs",
            &s.token("products:read").await,
            None,
        )
        .await;
    expect_error(res, StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE").await;

    // The operator's check recomputes the same chain.
    let org = s.org();
    let out = gatehouse(
        &s.data_dir(),
        &["audit", "verify", "--org", org.as_str(), "--json"],
        None,
    )
    .await
    .json();
    let admin = out["chains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["category"] == "admin")
        .unwrap()
        .clone();
    assert_eq!(admin["count"], chain.len());
    assert_eq!(admin["last_hash"], chain.last().unwrap()["hash"]);
}

/// Runs `sql` on the test server's database as someone with database
/// access would.
async fn by_hand(s: &TestServer, sql: &str) -> Result<u64, String> {
    if s.settings.database_url.starts_with("postgres") {
        gatehouse_store_postgres::testing::execute(&s.settings.database_url, sql).await
    } else {
        let path = s.data_dir().join("gatehouse.db");
        let sql = sql.to_owned();
        tokio::task::spawn_blocking(move || {
            let c = rusqlite::Connection::open(path).unwrap();
            c.execute_batch(&sql)
                .map(|()| c.changes())
                .map_err(|e| e.to_string())
        })
        .await
        .unwrap()
    }
}

#[tokio::test]
async fn d58_a_sealed_row_cannot_be_updated_and_one_changed_by_hand_fails_verify_at_its_sequence() {
    let s = TestServer::start().await;
    let t = s.token(SCOPES).await;
    for (name, sku) in [("Lamp", "LAMP-1"), ("Desk", "DESK-1"), ("Chair", "CHAIR-1")] {
        new_product(&s, &t, name, sku).await;
    }
    audit_once(&s, &t, "?action=product.created", 3).await;
    let chain = admin_chain(&s, &t).await;
    let desk = chain
        .iter()
        .find(|e| e["action"] == "product.created" && e["changes"]["name"]["to"] == "Desk")
        .expect("the desk's entry");
    let sequence = desk["sequence"].as_u64().unwrap();
    let org = s.org();
    let verify = || async {
        gatehouse(
            &s.data_dir(),
            &[
                "audit",
                "verify",
                "--org",
                org.as_str(),
                "--category",
                "admin",
            ],
            None,
        )
        .await
    };
    let ok = verify().await;
    assert!(ok.status.success(), "{}", ok.stderr);
    assert!(
        ok.stdout
            .contains(&format!("{} entries verified", chain.len())),
        "{}",
        ok.stdout
    );

    // The trigger refuses Gatehouse's own mistakes: no UPDATE of a sealed
    // row, no DELETE outside the purge.
    let edit = format!(
        "UPDATE audit_entries SET body = replace(body, 'Desk', 'Dusk') WHERE sequence = {sequence} AND category = 'admin' AND org_id = '{org}'"
    );
    let refused = by_hand(&s, &edit).await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("written once and sealed once")),
        "{refused:?}"
    );
    let delete = format!("DELETE FROM audit_entries WHERE org_id = '{org}'");
    let refused = by_hand(&s, &delete).await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("removed only by the purge")),
        "{refused:?}"
    );

    // Someone with database access gets past the trigger: the chain
    // catches it, at that sequence.
    assert_eq!(
        past_the_guard(&s, "audit_entries_seal_only", &edit).await,
        Ok(1)
    );
    let broken = verify().await;
    assert_eq!(broken.status.code(), Some(1), "{}", broken.stdout);
    assert!(
        broken
            .stderr
            .contains(&format!("the admin chain breaks at sequence {sequence}")),
        "{}",
        broken.stderr
    );
}

#[tokio::test]
async fn d58_exports_stream_every_entry_with_end_lines_and_are_audited() {
    let s = TestServer::start().await;
    let t = s.token(SCOPES).await;
    new_product(&s, &t, "Comma, \"quoted\"", "QUOTE-1").await;
    // A User-Agent a spreadsheet would run as a formula.
    let res = s
        .request(Method::POST, "/v1/products")
        .bearer_auth(&t)
        .header("user-agent", "=2+3")
        .json(&json!({"name": "Formula", "sku": "FORMULA-1", "price": 1, "stock": 0}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    audit_once(&s, &t, "?action=product.created", 2).await;
    let chain = admin_chain(&s, &t).await;
    // The security chain: the client's first token of the period.
    let security = chain_of(&s, &t, "security").await;
    assert_eq!(security.len(), 1, "{security:?}");
    assert_eq!(security[0]["action"], "credential.used");

    let res = s
        .call(Method::GET, "/v1/audit-logs/export?format=jsonl", &t, None)
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()["content-type"], "application/jsonl");
    assert_eq!(res.headers()["cache-control"], "no-store");
    let text = res.text().await.unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let entries: Vec<&Value> = lines.iter().filter(|l| l.get("end").is_none()).collect();
    assert_eq!(
        entries.len(),
        chain.len() + security.len(),
        "every sealed entry: {text}"
    );
    for (e, c) in entries.iter().zip(chain.iter().chain(&security)) {
        assert_eq!(*e, c, "as the API shows it, oldest first");
    }
    let ends: Vec<&Value> = lines.iter().filter_map(|l| l.get("end")).collect();
    assert_eq!(
        ends[0],
        &json!({
            "category": "admin",
            "count": chain.len(),
            "last_sequence": chain.last().unwrap()["sequence"],
            "last_hash": chain.last().unwrap()["hash"],
        })
    );
    assert_eq!(
        ends[1],
        &json!({
            "category": "security",
            "count": 1,
            "last_sequence": 1,
            "last_hash": security[0]["hash"],
        })
    );
    assert!(lines.last().unwrap().get("end").is_some());

    // CSV: D58's columns; a value a spreadsheet would run is not a formula.
    // (Once the first export's own entry is sealed, it is in this one.)
    audit_once(&s, &t, "?action=audit_log.exported", 1).await;
    let res = s
        .call(Method::GET, "/v1/audit-logs/export?format=csv", &t, None)
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()["content-type"], "text/csv; charset=utf-8");
    let csv = res.text().await.unwrap();
    let mut rows = csv.split("\r\n");
    assert_eq!(
        rows.next().unwrap(),
        "id,category,sequence,created_at,action,outcome,reason,actor_type,actor_id,actor_client_id,source_ip,source_user_agent,target_type,target_id,request_id,request_idempotency_key,changes,details,hash"
    );
    assert!(
        csv.contains(",\"'=2+3\","),
        "quoted, with a leading ': {csv}"
    );
    assert!(!csv.contains(",=2+3"), "{csv}");
    // The changes cell: JSON, quoted, its quotes doubled.
    assert!(csv.contains(r#"""to"":""Comma, \""quoted\"""""#), "{csv}");
    assert_eq!(
        csv.split("\r\n").filter(|r| !r.is_empty()).count(),
        1 + chain.len() + 1 + security.len(),
        "a header and a row per entry, the first export's own now too (no line breaks inside)"
    );

    // Bad parameters; and each export recorded itself.
    let res = s
        .call(Method::GET, "/v1/audit-logs/export?format=xml", &t, None)
        .await;
    expect_error(res, StatusCode::BAD_REQUEST, "VALIDATION_ERROR").await;
    let exported = audit_once(&s, &t, "?action=audit_log.exported", 2).await;
    assert_eq!(exported["meta"]["total"], 2, "{exported}");
    assert_eq!(exported["data"][0]["category"], "admin");
    assert_eq!(exported["data"][0]["actor"]["type"], "client");
}

/// Verifies a compact ES256 JWS against the JWK of its `kid` in `jwks`;
/// answers its header and payload.
fn verify_jws(jws: &str, jwks: &Value) -> (Value, Value) {
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    let mut parts = jws.split('.');
    let (h, p, sig) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let header: Value = serde_json::from_slice(&B64.decode(h).unwrap()).unwrap();
    let payload: Value = serde_json::from_slice(&B64.decode(p).unwrap()).unwrap();
    let jwk = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"] == header["kid"])
        .unwrap_or_else(|| panic!("{header} has its key in {jwks}"));
    let mut point = vec![0x04];
    point.extend(B64.decode(jwk["x"].as_str().unwrap()).unwrap());
    point.extend(B64.decode(jwk["y"].as_str().unwrap()).unwrap());
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
        .verify(format!("{h}.{p}").as_bytes(), &B64.decode(sig).unwrap())
        .expect("the checkpoint's signature verifies");
    (header, payload)
}

#[tokio::test]
async fn d58_checkpoints_are_signed_listed_told_and_published_with_their_keys() {
    let s = TestServer::start().await;
    let t = s.token(&format!("{SCOPES} events:read")).await;
    new_product(&s, &t, "Lamp", "LAMP-1").await;
    // The chain's first sealed entry brings its first checkpoint.
    let first = {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let body = audit(&s, &t, "/checkpoints?category=admin").await;
            if body["meta"]["total"].as_u64().unwrap() >= 1 || std::time::Instant::now() > deadline
            {
                break body;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    assert_eq!(first["meta"]["total"], 1, "{first}");
    let cp = first["data"][0].clone();
    let org = s.org();
    assert_eq!(cp["org"], org.as_str());
    assert_eq!(cp["category"], "admin");
    let chain = admin_chain(&s, &t).await;
    let at = chain
        .iter()
        .find(|e| e["sequence"] == cp["sequence"])
        .expect("the checkpoint's sequence is in the chain");
    assert_eq!(cp["hash"], at["hash"]);

    // Its JWS verifies with /.well-known/audit-keys.json, and says the same.
    let keys: Value = s
        .request(Method::GET, "/.well-known/audit-keys.json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let (header, payload) = verify_jws(cp["jws"].as_str().unwrap(), &keys);
    assert_eq!(header["typ"], "gatehouse-audit-checkpoint+jws");
    assert_eq!(header["alg"], "ES256");
    assert_eq!(payload["org"], org.as_str());
    assert_eq!(payload["sequence"], cp["sequence"]);
    assert_eq!(payload["hash"], cp["hash"]);
    for claim in ["iss", "aud", "exp"] {
        assert!(payload.get(claim).is_none(), "no {claim}: never a token");
    }
    // It is not an access token either.
    let res = s
        .call(
            Method::GET,
            "/v1/products",
            cp["jws"].as_str().unwrap(),
            None,
        )
        .await;
    expect_error(res, StatusCode::UNAUTHORIZED, "INVALID_TOKEN").await;

    // `gatehouse audit checkpoint` makes one now, at the new head.
    new_product(&s, &t, "Desk", "DESK-1").await;
    audit_once(&s, &t, "?action=product.created", 2).await;
    let out = gatehouse(
        &s.data_dir(),
        &[
            "audit",
            "checkpoint",
            "--org",
            org.as_str(),
            "--category",
            "admin",
            "--json",
        ],
        None,
    )
    .await
    .json();
    let made = &out["data"][0];
    let chain = admin_chain(&s, &t).await;
    let head = chain.last().unwrap();
    assert!(made["sequence"].as_u64().unwrap() > cp["sequence"].as_u64().unwrap());
    assert_eq!(
        made["hash"],
        chain
            .iter()
            .find(|e| e["sequence"] == made["sequence"])
            .unwrap()["hash"]
    );
    assert!(made["sequence"].as_u64().unwrap() <= head["sequence"].as_u64().unwrap());
    let listed = audit(&s, &t, "/checkpoints?category=admin").await;
    assert_eq!(listed["meta"]["total"], 2, "{listed}");
    assert_eq!(listed["data"][0]["jws"], made["jws"], "newest first");
    verify_jws(made["jws"].as_str().unwrap(), &keys);

    // Each was told as `audit.checkpoint`, with the same object.
    let told: Vec<Value> = crate::events::told(&s, "?type=audit.checkpoint")
        .await
        .into_iter()
        .filter(|e| e["data"]["object"]["category"] == "admin")
        .collect();
    assert_eq!(told.len(), 2, "{told:?}");
    assert_eq!(told[1]["data"]["object"], cp);
    assert_eq!(told[0]["actor"]["type"], "system");
    // A checkpoint is not an entry of the log it signs.
    assert_eq!(audit(&s, &t, "?action=audit.").await["meta"]["total"], 0);
}

/// The `sequence` of the admin chain's newest checkpoint once it reaches
/// `at_least` (the sealer's first, the periodic ones), within 20 s.
async fn checkpoint_reaching(s: &TestServer, t: &str, at_least: u64) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let body = audit(s, t, "/checkpoints?category=admin&limit=1").await;
        let newest = body["data"][0].clone();
        if newest["sequence"].as_u64().is_some_and(|q| q >= at_least) {
            return newest;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint reached sequence {at_least}: {body}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// D58: a purge takes each chain's oldest entries past the retention (here
/// 3 s, which only `--test-settings` allows), a prefix, up to a checkpoint,
/// never the head; the checkpoints before it go with them; `gatehouse audit
/// verify` then starts at the kept checkpoint. Checkpoints come every
/// `GATEHOUSE_AUDIT_CHECKPOINT_EVERY` (here 1 s) for chains with new entries.
#[tokio::test]
async fn d58_the_purge_takes_the_oldest_entries_up_to_a_checkpoint_and_verify_starts_there() {
    let s = TestServer::start_with(|c| {
        c.test_settings = true;
        c.audit.retention_admin_secs = 3;
        c.audit.checkpoint_every_secs = 1;
    })
    .await;
    let t = s.token(SCOPES).await;
    for (name, sku) in [("Lamp", "LAMP-1"), ("Desk", "DESK-1"), ("Chair", "CHAIR-1")] {
        new_product(&s, &t, name, sku).await;
    }
    audit_once(&s, &t, "?action=product.created", 3).await;
    let old = admin_chain(&s, &t).await;
    let old_head = old.last().unwrap()["sequence"].as_u64().unwrap();
    // A periodic checkpoint signs the head within a second or two.
    let anchor = checkpoint_reaching(&s, &t, old_head).await;
    assert_eq!(anchor["sequence"].as_u64(), Some(old_head));
    // A newer entry, past the old ones, then its own checkpoint.
    new_product(&s, &t, "Fresh", "FRESH-1").await;
    audit_once(&s, &t, "?action=product.created", 4).await;
    let head = admin_chain(&s, &t).await.last().unwrap()["sequence"]
        .as_u64()
        .unwrap();
    checkpoint_reaching(&s, &t, head).await;

    // The purge (every 5 s with a retention this short) takes the prefix
    // up to the checkpoint at the old head; the head stays.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let kept = loop {
        let chain = admin_chain(&s, &t).await;
        if chain.first().and_then(|e| e["sequence"].as_u64()) > Some(old_head) {
            break chain;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "nothing purged: {chain:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    };
    assert_eq!(kept[0]["sequence"].as_u64(), Some(old_head + 1), "a prefix");
    assert_eq!(kept.last().unwrap()["sequence"].as_u64(), Some(head));
    assert!(
        kept.iter().all(|e| e["changes"]["name"]["to"] != "Lamp"),
        "{kept:?}"
    );
    // The checkpoint the kept entries continue from stays; older ones go.
    let listed = items(&audit(&s, &t, "/checkpoints?category=admin&limit=100").await);
    assert!(
        listed
            .iter()
            .all(|c| c["sequence"].as_u64().unwrap() >= old_head),
        "{listed:?}"
    );
    assert!(listed.iter().any(|c| c["sequence"] == anchor["sequence"]));

    // Verification starts at that checkpoint and covers what is kept.
    let org = s.org();
    let out = gatehouse(
        &s.data_dir(),
        &[
            "audit",
            "verify",
            "--org",
            org.as_str(),
            "--category",
            "admin",
        ],
        None,
    )
    .await;
    assert!(out.status.success(), "{}", out.stderr);
    assert!(
        out.stdout
            .contains(&format!("{} entries verified", kept.len())),
        "{}",
        out.stdout
    );
    // The purge was the only DELETE: one by hand is still refused.
    let refused = by_hand(
        &s,
        &format!("DELETE FROM audit_entries WHERE org_id = '{org}'"),
    )
    .await;
    assert!(refused.is_err(), "{refused:?}");
}

/// D58's truncation test: the newest entries deleted by someone with
/// database access after a checkpoint was sent by webhook. The chain that
/// is left verifies on its own; with the checkpoints received,
/// `gatehouse audit verify --checkpoints FILE` fails naming the checkpoint
/// it cannot reach.
#[tokio::test]
async fn d58_newest_entries_deleted_after_a_checkpoint_fail_verify_with_the_webhooks_checkpoints() {
    let s = TestServer::start_with(|c| {
        c.webhook_allow = gatehouse_domain::webhook::AllowList::parse("127.0.0.0/8").unwrap();
        c.test_settings = true;
    })
    .await;
    let t = s.token(&format!("{SCOPES} webhooks:write")).await;
    let (url, receiver) = crate::webhooks::Receiver::start(&[]).await;
    let res = s
        .call(
            Method::POST,
            "/v1/webhook-endpoints",
            &t,
            Some(json!({"url": url, "enabled_events": ["audit.checkpoint"]})),
        )
        .await;
    body_of(res, StatusCode::CREATED).await;
    for (name, sku) in [("Lamp", "LAMP-1"), ("Desk", "DESK-1"), ("Chair", "CHAIR-1")] {
        new_product(&s, &t, name, sku).await;
    }
    audit_once(&s, &t, "?action=product.created", 3).await;
    let chain = admin_chain(&s, &t).await;
    let head = chain.last().unwrap()["sequence"].as_u64().unwrap();
    let org = s.org();
    // A checkpoint of the head now, received by the webhook.
    let out = gatehouse(
        &s.data_dir(),
        &[
            "audit",
            "checkpoint",
            "--org",
            org.as_str(),
            "--category",
            "admin",
        ],
        None,
    )
    .await;
    assert!(out.status.success(), "{}", out.stderr);
    let received = loop {
        let got = receiver.wait_for(1).await;
        let events: Vec<Value> = got
            .iter()
            .map(|(_, body)| serde_json::from_slice(body).unwrap())
            .collect();
        if events
            .iter()
            .any(|e| e["data"]["object"]["sequence"].as_u64() == Some(head))
        {
            break events;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(received.iter().all(|e| e["type"] == "audit.checkpoint"));
    let file = s.data_dir().join("received-checkpoints.jsonl");
    let lines: Vec<String> = received.iter().map(Value::to_string).collect();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let verify = |with: bool| {
        let (dir, file, org) = (s.data_dir(), file.clone(), org.clone());
        async move {
            let mut args = vec![
                "audit",
                "verify",
                "--org",
                org.as_str(),
                "--category",
                "admin",
            ];
            let path = file.to_str().unwrap().to_owned();
            if with {
                args.extend(["--checkpoints", path.as_str()]);
            }
            gatehouse(&dir, &args, None).await
        }
    };
    let ok = verify(true).await;
    assert!(ok.status.success(), "{}", ok.stderr);
    assert!(
        ok.stdout
            .contains(&format!("checkpoints: {} held", received.len())),
        "{}",
        ok.stdout
    );

    // The two newest rows deleted past the trigger.
    let gone = past_the_guard(
        &s,
        "audit_entries_purge_only",
        &format!(
            "DELETE FROM audit_entries WHERE org_id = '{org}' AND category = 'admin' AND sequence >= {}",
            head - 1
        ),
    )
    .await;
    assert_eq!(gone, Ok(2));
    // What is left is a chain that verifies on its own …
    let alone = verify(false).await;
    assert!(alone.status.success(), "{}", alone.stderr);
    // … but not against the checkpoint the webhook received.
    let caught = verify(true).await;
    assert_eq!(caught.status.code(), Some(1), "{}", caught.stdout);
    assert!(
        caught.stderr.contains(&format!(
            "the admin chain does not reach sequence {head} (it ends at {})",
            head - 2
        )),
        "{}",
        caught.stderr
    );
}

/// Sleeps to just past the next multiple of `period` seconds (D58's
/// periods are aligned to 00:00 UTC, so to multiples of the period).
async fn to_next_period(period: u64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let next = (now.as_secs() / period + 1) * period;
    let wait = std::time::Duration::from_secs(next) - now + std::time::Duration::from_millis(100);
    tokio::time::sleep(wait).await;
}

/// D58: a machine credential's use is recorded (`credential.used`) the
/// first time in each `GATEHOUSE_AUDIT_PERIOD` (here 4 s, which only
/// `--test-settings` allows) and the first time from each new address in
/// it; introspection by a client likewise, plus every look at another
/// client's token.
#[tokio::test]
async fn d58_machine_credentials_and_introspection_are_recorded_at_their_first_use_per_period() {
    const PERIOD: u64 = 4;
    let s = TestServer::start_with(|c| {
        c.test_settings = true;
        c.audit.period_secs = PERIOD as i64;
    })
    .await;
    let org = s.org();
    let (id, secret) = s.new_client(&org, "products:read").await;
    let admin = s.token("admin audit:read").await;
    let key = body_of(
        s.call(
            Method::POST,
            "/v1/api-keys",
            &admin,
            Some(json!({"name": "reader", "scopes": ["products:read"]})),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let (key_id, key_text) = (
        key["data"]["id"].as_str().unwrap().to_owned(),
        key["data"]["key"].as_str().unwrap().to_owned(),
    );
    let other = s.token("products:read").await;
    let elsewhere = crate::common::client_from(
        &s,
        std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 3)),
    );
    let introspect = |token: String| {
        let (id, secret) = (id.clone(), secret.clone());
        let req = s
            .request(Method::POST, "/oauth/introspect")
            .basic_auth(id, Some(secret))
            .form(&[("token", token)]);
        async move { req.send().await.unwrap().status() }
    };

    // Within one period: two tokens from here, one from elsewhere, two
    // requests with the key, two looks at the client's own token and two
    // at another client's.
    to_next_period(PERIOD).await;
    let own = s.token_for(&id, &secret, "products:read").await;
    s.token_for(&id, &secret, "products:read").await;
    let res = elsewhere
        .post(s.url("/oauth/token"))
        .basic_auth(&id, Some(&secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    for _ in 0..2 {
        let res = s.call(Method::GET, "/v1/products", &key_text, None).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(introspect(own.clone()).await, StatusCode::OK);
        assert_eq!(introspect(other.clone()).await, StatusCode::OK);
    }
    // The next period: the client's first use again.
    to_next_period(PERIOD).await;
    s.token_for(&id, &secret, "products:read").await;

    let entries = |query: String| {
        let (s, admin) = (&s, admin.clone());
        async move { items(&audit_once(s, &admin, &query, 0).await) }
    };
    crate::audit::audit_once(
        &s,
        &admin,
        &format!("?action=credential.used&target={id}"),
        3,
    )
    .await;
    let used = entries(format!("?action=credential.used&target={id}&limit=100")).await;
    assert_eq!(used.len(), 3, "{used:#?}");
    // Newest first: the new period's, then elsewhere's, then the first.
    assert_eq!(used[1]["source"]["ip"], "127.0.0.3");
    assert_eq!(used[2]["source"]["ip"], "127.0.0.1");
    for e in &used {
        assert_eq!(e["category"], "security");
        assert_eq!(
            e["actor"],
            json!({"type": "client", "id": id, "client_id": id})
        );
        assert_eq!(e["target"], json!({"type": "application", "id": id}));
        assert_eq!(e["details"]["grant_type"], "client_credentials");
        assert_eq!(e["details"]["client_id"], id.as_str());
    }
    let by_key = entries(format!("?action=credential.used&target={key_id}")).await;
    assert_eq!(by_key.len(), 1, "{by_key:#?}");
    assert_eq!(by_key[0]["actor"]["type"], "api_key");
    assert_eq!(
        by_key[0]["target"],
        json!({"type": "api_key", "id": key_id})
    );

    let looked = entries(format!("?action=token.introspected&actor={id}&limit=100")).await;
    let own_jti = claims_of(&own)["jti"].clone();
    let other_jti = claims_of(&other)["jti"].clone();
    let of = |jti: &Value| looked.iter().filter(|e| e["target"]["id"] == *jti).count();
    assert_eq!(of(&own_jti), 1, "first per period: {looked:#?}");
    assert_eq!(
        of(&other_jti),
        2,
        "another client's token, every time: {looked:#?}"
    );
    let foreign = looked
        .iter()
        .find(|e| e["target"]["id"] == other_jti)
        .unwrap();
    assert_eq!(foreign["details"]["client_id"], s.creds.client_id.as_str());
    // No credential's text in the log.
    let all = s
        .call(
            Method::GET,
            "/v1/audit-logs/export?format=jsonl",
            &admin,
            None,
        )
        .await
        .text()
        .await
        .unwrap();
    for secret in [&secret, &key_text, &own, &other] {
        assert!(!all.contains(secret.as_str()), "a secret in the export");
    }
}

/// The claims of a JWT (signature not checked).
fn claims_of(token: &str) -> Value {
    use base64::Engine;
    let part = token.split('.').nth(1).unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .unwrap(),
    )
    .unwrap()
}

/// D58: `gatehouse audit verify` trusts nothing that does not vouch for
/// itself: a checkpoint whose signature was altered, a checkpoint of
/// another organization (signed by the same keys), and a chain whose
/// oldest entries are gone with no kept checkpoint at the cut each fail
/// with status 1, saying which and why.
#[tokio::test]
async fn d58_verify_refuses_forged_and_foreign_checkpoints_and_an_unvouched_cut() {
    let s = TestServer::start().await;
    let t = s.token(SCOPES).await;
    for (name, sku) in [("Lamp", "LAMP-1"), ("Desk", "DESK-1"), ("Chair", "CHAIR-1")] {
        new_product(&s, &t, name, sku).await;
    }
    audit_once(&s, &t, "?action=product.created", 3).await;
    let org = s.org();
    let (other, _) = crate::users::roomy_org(&s, "products:read").await;
    let dir = s.data_dir();
    let checkpoint = |org: String| {
        let dir = dir.clone();
        async move {
            let out = gatehouse(
                &dir,
                &[
                    "audit",
                    "checkpoint",
                    "--org",
                    org.as_str(),
                    "--category",
                    "admin",
                    "--json",
                ],
                None,
            )
            .await
            .json();
            out["data"][0].clone()
        }
    };
    let mine = checkpoint(org.to_string()).await;
    let theirs = checkpoint(other.to_string()).await;
    let head = mine["sequence"].as_u64().unwrap();
    let verify_with = |lines: Vec<String>| {
        let (dir, org) = (dir.clone(), org.to_string());
        async move {
            let file = dir.join(format!("given-{}.jsonl", rand_name()));
            std::fs::write(&file, lines.join("\n") + "\n").unwrap();
            gatehouse(
                &dir,
                &[
                    "audit",
                    "verify",
                    "--org",
                    org.as_str(),
                    "--category",
                    "admin",
                    "--checkpoints",
                    file.to_str().unwrap(),
                ],
                None,
            )
            .await
        }
    };
    let jws = mine["jws"].as_str().unwrap().to_owned();
    let fine = verify_with(vec![jws.clone()]).await;
    assert!(fine.status.success(), "{}", fine.stderr);

    // One character of the signature changed.
    let (signed, signature) = jws.rsplit_once('.').unwrap();
    let mut forged_sig: Vec<char> = signature.chars().collect();
    let i = forged_sig.len() / 2;
    forged_sig[i] = if forged_sig[i] == 'A' { 'B' } else { 'A' };
    let forged = format!("{signed}.{}", forged_sig.iter().collect::<String>());
    let out = verify_with(vec![jws.clone(), forged]).await;
    assert_eq!(out.status.code(), Some(1), "{}", out.stdout);
    assert!(
        out.stderr
            .contains("the checkpoint on line 2 fails: the signature does not verify"),
        "{}",
        out.stderr
    );

    // Another organization's checkpoint, signed with the same key.
    let out = verify_with(vec![theirs["jws"].as_str().unwrap().to_owned()]).await;
    assert_eq!(out.status.code(), Some(1), "{}", out.stdout);
    assert!(
        out.stderr
            .contains("the checkpoint on line 1 fails: it is another organization's"),
        "{}",
        out.stderr
    );

    // The oldest entries deleted by hand up to a sequence no checkpoint
    // vouches for: the kept chain cannot be anchored.
    let listed = items(&audit(&s, &t, "/checkpoints?category=admin&limit=100").await);
    let signed_at: Vec<u64> = listed
        .iter()
        .map(|c| c["sequence"].as_u64().unwrap())
        .collect();
    let cut = (1..head)
        .find(|n| !signed_at.contains(n))
        .expect("a sequence below the head without a checkpoint");
    let gone = past_the_guard(
        &s,
        "audit_entries_purge_only",
        &format!(
            "DELETE FROM audit_entries WHERE org_id = '{org}' AND category = 'admin' AND sequence <= {cut}"
        ),
    )
    .await;
    assert_eq!(gone, Ok(cut));
    let out = gatehouse(
        &dir,
        &[
            "audit",
            "verify",
            "--org",
            org.as_str(),
            "--category",
            "admin",
        ],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", out.stdout);
    assert!(
        out.stderr.contains(&format!(
            "the admin chain breaks at sequence {}: the entries before it are gone and no kept checkpoint vouches for them",
            cut + 1
        )),
        "{}",
        out.stderr
    );
}

/// A file name no other call of the test uses.
fn rand_name() -> String {
    gatehouse_domain::UserId::generate().as_str().to_owned()
}
