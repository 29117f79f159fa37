//! D23 (continued): `gatehouse master-key rotate` while the server runs.
//! A value of every kind sealed under the master key (D3 revised) exists
//! first; the server keeps answering during the rotation, learns the new
//! key from storage, and afterwards every stored value opens under the new
//! key and none under the old one; the server, and the server restarted on
//! the new `master.key`, still use each of them.

use std::time::Duration;

use gatehouse_auth::MasterKey;
use gatehouse_auth::keys::aad;
use gatehouse_domain::Role;
use gatehouse_store::{SealedKind, SealedValue};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::cli::gatehouse;
use crate::common::TestServer;
use crate::common::browser::Browser;
use crate::dashboard::{person, sign_in};
use crate::mfa::{
    Auth, consent_and_exchange, enrol_on_account_page, exchange, password, rp, second_factor,
    server_time, totp_at,
};
use crate::users::body_of;

const HOOKS: &str = "webhooks:read webhooks:write";

async fn all_sealed(s: &TestServer) -> Vec<SealedValue> {
    let mut all = Vec::new();
    for kind in SealedKind::ALL {
        all.extend(s.store().sealed_values(kind, None, 1000).await.unwrap());
    }
    all
}

fn opens(key: &MasterKey, v: &SealedValue) -> bool {
    key.decrypt(&v.sealed, &aad::of(&v.at).unwrap()).is_some()
}

async fn refresh(s: &TestServer, rp: &crate::mfa::Rp, token: &str) -> Value {
    let res = s
        .request(Method::POST, "/oauth/token")
        .basic_auth(&rp.id, Some(&rp.secret))
        .form(&[("grant_type", "refresh_token"), ("refresh_token", token)])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    res.json().await.unwrap()
}

async fn new_endpoint(s: &TestServer, t: &str, url: &str) -> Value {
    body_of(
        s.call(
            Method::POST,
            "/v1/webhook-endpoints",
            t,
            Some(json!({ "url": url })),
        )
        .await,
        StatusCode::CREATED,
    )
    .await["data"]
        .clone()
}

#[tokio::test]
async fn d23_the_master_key_rotates_while_the_server_runs() {
    // D24's successor pair must outlive the rotation's wait.
    let s = TestServer::start_with(|c| c.refresh_grace_secs = 600).await;
    let dir = s.data_dir();
    let old = MasterKey::parse(&std::fs::read_to_string(dir.join("master.key")).unwrap()).unwrap();

    // A TOTP seed and the recovery-code key: an enrolment.
    let me = person(&s, &s.org(), "rotate@example.com", Role::Editor).await;
    let email = me.email.as_str();
    let mut b = Browser::new(&s);
    sign_in(&mut b, email).await;
    let (secret, codes) = enrol_on_account_page(&s, &mut b).await;
    // A successor pair: a sign-in with the code, then a refresh.
    let rp = rp(&s).await;
    let mut rb = Browser::new(&s);
    let auth = Auth::new(&rp, &[]);
    let login = auth.start(&mut rb).await;
    let step = password(&mut rb, &login, email).await;
    let t = server_time(&s).await;
    // The code of step T+1, which becomes the last accepted step.
    let last_step = (t + 30) / 30;
    let consent = second_factor(&mut rb, &step, &totp_at(&secret, t + 30)).await;
    let tokens = consent_and_exchange(&s, &mut rb, &rp, &auth, &consent).await;
    let first_refresh = tokens["refresh_token"].as_str().unwrap().to_owned();
    let pair = refresh(&s, &rp, &first_refresh).await;
    // Webhook secrets, the previous one in its grace, and a kept response
    // holding a secret (D50).
    let hooks = s.token(HOOKS).await;
    let e = new_endpoint(&s, &hooks, "https://hooks.example.com/a").await;
    let rotated = s
        .call(
            Method::POST,
            &format!("/v1/webhook-endpoints/{}/secret", e["id"].as_str().unwrap()),
            &hooks,
            Some(json!({"grace_seconds": 3600})),
        )
        .await;
    assert_eq!(rotated.status(), StatusCode::CREATED);
    let kept = replay_kept(&s, &hooks).await;

    let before = all_sealed(&s).await;
    for kind in SealedKind::ALL {
        assert!(
            before.iter().any(|v| v.at.kind() == kind),
            "a value of {kind:?} exists before the rotation"
        );
    }
    assert!(before.iter().all(|v| opens(&old, v)));

    // The rotation, while the server keeps answering and writing.
    let new = MasterKey::generate();
    let keys = tempfile::tempdir().unwrap();
    let file = keys.path().join("new.key");
    std::fs::write(&file, new.to_text()).unwrap();
    let command = {
        let (dir, file) = (dir.clone(), file.clone());
        tokio::spawn(async move { rotate(&dir, &file).await })
    };
    // Meanwhile the server keeps opening values as they move: the kept
    // successor pair and the kept response, every round.
    let mut during = Vec::new();
    let mut answered = 0;
    loop {
        let t = s.token("users:read").await;
        let res = s.call(Method::GET, "/v1/users", &t, None).await;
        assert_eq!(res.status(), StatusCode::OK, "answers during the rotation");
        let again = refresh(&s, &rp, &first_refresh).await;
        assert_eq!(
            again["refresh_token"], pair["refresh_token"],
            "D24's same pair"
        );
        assert_eq!(replay_kept(&s, &hooks).await, kept);
        answered += 1;
        if during.len() < 3 && answered % 4 == 1 {
            let n = during.len();
            during.push(new_endpoint(&s, &hooks, &format!("https://hooks.example.com/d{n}")).await);
        }
        if command.is_finished() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let out = command.await.unwrap().json();
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["key_id"], new.id());
    for kind in [
        "totp_seeds",
        "sealed_keys",
        "webhook_previous_secrets",
        "successor_pairs",
    ] {
        assert_eq!(out["resealed"][kind], 1, "{kind}: {out}");
    }
    assert!(
        out["resealed"]["signing_keys"].as_u64().unwrap() >= 1,
        "{out}"
    );
    assert!(
        out["resealed"]["kept_responses"].as_u64().unwrap() >= 1,
        "{out}"
    );
    assert_eq!(
        out["master_key_file"],
        dir.join("master.key").to_str().unwrap()
    );
    // The new key replaced master.key, readable by its owner only.
    assert_eq!(
        MasterKey::parse(&std::fs::read_to_string(dir.join("master.key")).unwrap())
            .unwrap()
            .id(),
        new.id()
    );
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("master.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // Every stored value opens under the new key (and so under it alone).
    let after = all_sealed(&s).await;
    assert!(after.len() >= before.len() + during.len());
    for v in &after {
        assert!(opens(&new, v), "{:?} under the new key", v.at);
    }
    // The server said it held the new key before values moved, and forgets
    // the old one at its next round.
    let mut held = Vec::new();
    for _ in 0..100 {
        held = s
            .store()
            .key_holders(gatehouse_domain::Timestamp::now().plus_seconds(-15))
            .await
            .unwrap();
        if held.len() == 1 && held[0].key_ids == [new.id()] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0].key_ids, [new.id()], "the old key forgotten");
    // The running server learned the new key: what it seals now is under it.
    let late = new_endpoint(&s, &hooks, "https://hooks.example.com/late").await;
    let late_id = late["id"].as_str().unwrap();
    let stored = all_sealed(&s).await;
    let sealed = stored
        .iter()
        .find(|v| matches!(&v.at, gatehouse_store::SealedAt::WebhookSecret { endpoint, previous: false, .. } if endpoint == late_id))
        .unwrap();
    assert!(opens(&new, sealed) && !opens(&old, sealed));

    // The running server still uses every kind: the successor pair of the
    // grace window, the kept response, the TOTP seed and a recovery code.
    let again = refresh(&s, &rp, &first_refresh).await;
    assert_eq!(
        again["access_token"], pair["access_token"],
        "D24's same pair"
    );
    assert_eq!(again["refresh_token"], pair["refresh_token"]);
    assert_eq!(replay_kept(&s, &hooks).await, kept);
    let sign_in_with = |code: String| {
        let (s, rp) = (&s, &rp);
        async move {
            let mut b = Browser::new(s);
            let auth = Auth::new(rp, &[]);
            let login = auth.start(&mut b).await;
            let step = password(&mut b, &login, email).await;
            let page = second_factor(&mut b, &step, &code).await;
            // The consent is remembered (D49): straight back with a code.
            exchange(s, rp, &auth, &page).await
        }
    };
    // A code of a step after the last accepted one, once the clock allows
    // one (T+1 at most, D56).
    let mut t = server_time(&s).await;
    while t / 30 < last_step {
        tokio::time::sleep(Duration::from_secs(1)).await;
        t = server_time(&s).await;
    }
    let tokens = sign_in_with(totp_at(&secret, t + 30)).await;
    assert!(tokens["access_token"].is_string());
    let tokens = sign_in_with(codes[0].clone()).await;
    assert!(tokens["access_token"].is_string(), "a recovery code");

    // Restarted on the new master.key alone, the server opens everything.
    let s = s.restart().await;
    let t = s.token("users:read").await;
    assert_eq!(
        s.call(Method::GET, "/v1/users", &t, None).await.status(),
        StatusCode::OK
    );
    // Tokens outlive a restart (the signing key is in storage), so the
    // replay is the same credential's.
    assert_eq!(replay_kept(&s, &hooks).await, kept);
    let again = refresh(&s, &rp, &first_refresh).await;
    assert_eq!(
        again["access_token"], pair["access_token"],
        "D24's same pair"
    );
    let mut b = Browser::new(&s);
    let auth = Auth::new(&rp, &[]);
    let login = auth.start(&mut b).await;
    let step = password(&mut b, &login, email).await;
    let page = second_factor(&mut b, &step, &codes[1]).await;
    let tokens = exchange(&s, &rp, &auth, &page).await;
    assert!(tokens["access_token"].is_string());

    // The same key again is refused: there is nothing to rotate.
    let out = rotate(&dir, &file).await;
    assert!(!out.status.success());
    assert!(out.json_error("VALIDATION_ERROR").contains(&new.id()));
}

/// `gatehouse master-key rotate --new-key-file FILE --json` on the data
/// directory `dir`.
async fn rotate(dir: &std::path::Path, file: &std::path::Path) -> crate::cli::Out {
    gatehouse(
        dir,
        &[
            "master-key",
            "rotate",
            "--new-key-file",
            file.to_str().unwrap(),
            "--json",
        ],
        None,
    )
    .await
}

/// The kept answer to the creation with `Idempotency-Key: rotate-kept-1`.
async fn replay_kept(s: &TestServer, hooks: &str) -> Value {
    let res = s
        .request(Method::POST, "/v1/webhook-endpoints")
        .bearer_auth(hooks)
        .header("Idempotency-Key", "rotate-kept-1")
        .json(&json!({"url": "https://hooks.example.com/kept"}))
        .send()
        .await
        .unwrap();
    body_of(res, StatusCode::CREATED).await
}
