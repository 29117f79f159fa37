//! D54 across two PostgreSQL nodes (D44 continued): writers on both nodes
//! of one organization get one sequence without gaps, each node's
//! sequencer and reads agree, and of two changes to one object the later
//! has the larger sequence.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::multinode_logout::two_nodes;
use crate::users::{body_of, roomy_org};

#[tokio::test]
async fn d54_writes_on_two_nodes_get_one_gap_free_sequence() {
    let (a, b) = two_nodes().await;
    let scopes = "products:read products:write events:read";
    // A roomy plan, so D28 stays out of the way; one token serves both
    // nodes (one database, one key ring).
    let (_, ta) = roomy_org(&a, scopes).await;
    let tb = ta.clone();
    // One product both nodes keep changing, and new ones on each.
    let res = a
        .call(
            Method::POST,
            "/v1/products",
            &ta,
            Some(json!({"name": "Shared", "sku": "SHARED", "price": 1, "stock": 1})),
        )
        .await;
    let shared = body_of(res, StatusCode::CREATED).await["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let writers = [(&a, &ta, "A"), (&b, &tb, "B")].map(|(s, t, node)| {
        let shared = shared.clone();
        async move {
            for i in 0..15 {
                let sku = format!("{node}-{i}");
                let res = s
                    .call(
                        Method::POST,
                        "/v1/products",
                        t,
                        Some(json!({"name": "P", "sku": sku, "price": 1, "stock": 1})),
                    )
                    .await;
                assert_eq!(res.status(), StatusCode::CREATED);
                let stock = if node == "A" { 100 + i } else { 200 + i };
                let res = s
                    .call(
                        Method::PATCH,
                        &format!("/v1/products/{shared}"),
                        t,
                        Some(json!({"stock": stock})),
                    )
                    .await;
                assert_eq!(res.status(), StatusCode::OK);
            }
        }
    });
    let [wa, wb] = writers;
    tokio::join!(wa, wb);

    let from_a = crate::events::all_after(&a, &ta, 0).await;
    // D58's periodic checkpoints may add events between the two reads:
    // node B is read until it has at least what node A showed, and the
    // comparison below covers all of that.
    let mut from_b = crate::events::all_after(&b, &tb, 0).await;
    for _ in 0..100 {
        if from_b.len() >= from_a.len() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        from_b = crate::events::all_after(&b, &tb, 0).await;
    }
    from_b.truncate(from_a.len());
    let seqs: Vec<i64> = from_a
        .iter()
        .map(|e| e["sequence"].as_i64().unwrap())
        .collect();
    // The harness's client (application.created), then 61 product events,
    // and the chains' first audit checkpoints (D58) among them.
    assert_eq!(
        seqs,
        (1..=from_a.len() as i64).collect::<Vec<_>>(),
        "one sequence, no gaps"
    );
    assert_eq!(
        from_a
            .iter()
            .filter(|e| e["type"] != "audit.checkpoint")
            .count(),
        62
    );
    assert_eq!(from_a[0]["type"], "application.created");
    assert_eq!(
        from_a, from_b,
        "both nodes show the same events in the same order"
    );
    // Of two changes to one object, the later has the larger sequence:
    // each update's previous stock is what the event before it showed.
    let mut stock = Value::from(1);
    for e in from_a
        .iter()
        .filter(|e| e["data"]["object"]["id"] == shared.as_str())
        .skip(1)
    {
        assert_eq!(e["data"]["previous_attributes"]["stock"], stock, "{e}");
        stock = e["data"]["object"]["stock"].clone();
    }
    let res = a
        .call(Method::GET, &format!("/v1/products/{shared}"), &ta, None)
        .await;
    assert_eq!(body_of(res, StatusCode::OK).await["data"]["stock"], stock);
}
