//! Browser sessions (D57): listed while their browser sign-in or a chain
//! begun in them lives, touched, ended explicitly in one transaction with
//! their chains and `session.revoked`, kept by the purge while a chain
//! lives, ended by deactivation and deletion but not by demotion.

use gatehouse_domain::SessionId;
use gatehouse_domain::session::SessionSelect;

use super::events::{json, kinds, settled};
use super::*;
use crate::RevocationKind;

/// A user of `o` with one session per entry of `created` (seconds after
/// `now`), each browser sign-in lasting an hour; the sessions oldest first.
async fn person_with_sessions(
    s: &dyn Store,
    o: &OrgId,
    email: &str,
    now: Timestamp,
    created: &[i64],
    first_digest: u8,
) -> (gatehouse_domain::User, Vec<Session>) {
    let u = s
        .insert_user(
            o,
            &user(email, Role::Editor, UserStatus::Active, 1),
            teller(),
        )
        .await
        .unwrap();
    let mut made = Vec::new();
    for (i, at) in created.iter().enumerate() {
        let start = now.plus_seconds(*at);
        let sess = session(o, &u.id, start, start.plus_seconds(3600));
        s.create_session(o, &[first_digest + i as u8; 32], &sess, &[])
            .await
            .unwrap();
        made.push(sess);
    }
    (u, made)
}

/// A chain of `u` with `client` begun in `sess` (through a redeemed code),
/// its first refresh token `[token; 32]`.
async fn chain_in(
    s: &dyn Store,
    o: &OrgId,
    client: &ClientId,
    u: &UserId,
    sess: &Session,
    now: Timestamp,
    (code, token, id): (u8, u8, &str),
) -> RefreshChain {
    let c = AuthCode {
        sid: Some(sess.id.as_str().to_owned()),
        auth_time: Some(sess.created_at),
        ..auth_code(code, o, client, u, now)
    };
    s.insert_auth_code(o, &c).await.unwrap();
    let mut ch = chain_for(o, client, u, now, id);
    ch.sid = Some(sess.id.as_str().to_owned());
    s.redeem_auth_code(&[code; 32], now, &ch, &rt(token, id, now))
        .await
        .unwrap();
    ch
}

pub async fn sessions_are_listed_touched_and_paged(s: &dyn Store) {
    let o = new_org(s).await;
    let other = new_org(s).await;
    let now = Timestamp::from_millis(Timestamp::now().millis());
    let (u, made) = person_with_sessions(s, &o, "list@example.com", now, &[0, 10, 20], 80).await;
    let (stranger, _) = person_with_sessions(s, &o, "other@example.com", now, &[5], 90).await;

    let (page, total) = s
        .list_sessions(&o, &u.id, Page::default(), now)
        .await
        .unwrap();
    assert_eq!(total, 3);
    let ids: Vec<&SessionId> = page.iter().map(|x| &x.id).collect();
    assert_eq!(
        ids,
        vec![&made[2].id, &made[1].id, &made[0].id],
        "newest first (D14 continued)"
    );
    assert_eq!(page[0].ip.as_deref(), Some("192.0.2.10"));
    assert_eq!(page[0].user_agent.as_deref(), Some("Conformance/1.0"));
    assert_eq!(page[0].amr, vec!["pwd".to_owned()]);
    assert!(page[0].applications.is_empty());
    let (second, total) = s
        .list_sessions(
            &o,
            &u.id,
            Page {
                limit: 1,
                offset: 1,
            },
            now,
        )
        .await
        .unwrap();
    assert_eq!(total, 3, "the exact total whatever the page");
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].id, made[1].id);
    // Another organization sees none of them; another person neither.
    let (none, n) = s
        .list_sessions(&other, &u.id, Page::default(), now)
        .await
        .unwrap();
    assert!(none.is_empty() && n == 0);
    assert_eq!(
        s.list_sessions(&o, &stranger.id, Page::default(), now)
            .await
            .unwrap()
            .1,
        1
    );

    // A browser use writes its time, place and the sign-in's new end.
    let seen = Session {
        last_seen_at: now.plus_seconds(100),
        expires_at: now.plus_seconds(7200),
        ip: Some("198.51.100.4".into()),
        user_agent: Some("Other/2".into()),
        ..made[0].clone()
    };
    assert!(
        s.record_browser_use(&other, &seen).await.is_err(),
        "a session is written only through its organization"
    );
    s.record_browser_use(&o, &seen).await.unwrap();
    let back = s.resolve_session(&[80; 32]).await.unwrap().unwrap();
    assert_eq!(back, seen);
    // An older use never moves `last_seen_at` back.
    let stale = Session {
        last_seen_at: now.plus_seconds(50),
        ..seen.clone()
    };
    s.record_browser_use(&o, &stale).await.unwrap();
    assert_eq!(
        s.resolve_session(&[80; 32])
            .await
            .unwrap()
            .unwrap()
            .last_seen_at,
        now.plus_seconds(100)
    );
}

pub async fn ending_sessions_revokes_their_chains_and_tells(s: &dyn Store) {
    let o = new_org(s).await;
    let other = new_org(s).await;
    let now = Timestamp::from_millis(Timestamp::now().millis());
    let (u, made) = person_with_sessions(s, &o, "end@example.com", now, &[0, 10, 20], 100).await;
    let c = s.insert_client(&o, &client(None), teller()).await.unwrap();
    let ch0 = chain_in(s, &o, &c.id, &u.id, &made[0], now, (110, 111, "endchain0")).await;
    let ch1 = chain_in(s, &o, &c.id, &u.id, &made[1], now, (112, 113, "endchain1")).await;
    let before = s.revocations_since(0, now).await.unwrap();
    let last = before.iter().map(|r| r.id).max().unwrap_or(0);

    let (listed, _) = s
        .list_sessions(&o, &u.id, Page::default(), now)
        .await
        .unwrap();
    assert_eq!(listed[2].applications, vec![c.id.clone()], "applications");
    assert_eq!(
        s.session_of_chain(&o, &ch0.id).await.unwrap(),
        Some(made[0].id.clone())
    );
    assert_eq!(s.session_of_chain(&other, &ch0.id).await.unwrap(), None);

    // A stranger's id, or another organization, ends nothing.
    let stray = SessionSelect::One(SessionId::generate());
    assert!(
        s.end_sessions(&o, &u.id, &stray, now, teller())
            .await
            .unwrap()
            .is_empty()
    );
    let one = SessionSelect::One(made[0].id.clone());
    assert!(
        s.end_sessions(&other, &u.id, &one, now, teller())
            .await
            .unwrap()
            .is_empty()
    );
    let ended = s
        .end_sessions(&o, &u.id, &one, now, teller())
        .await
        .unwrap();
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].id, made[0].id);
    assert_eq!(ended[0].applications, vec![c.id.clone()]);
    assert_eq!(s.resolve_session(&[100; 32]).await.unwrap(), None);
    assert!(
        s.live_chains(&o, &ChainFilter::Session(made[0].id.to_string()))
            .await
            .unwrap()
            .is_empty(),
        "the chain begun in it is revoked"
    );
    assert_eq!(
        s.live_chains(&o, &ChainFilter::Session(made[1].id.to_string()))
            .await
            .unwrap(),
        vec![ch1.id.clone()],
        "another session's chain lives"
    );
    let written: Vec<(RevocationKind, String)> = s
        .revocations_since(last, now)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.kind, r.subject))
        .collect();
    assert!(written.contains(&(RevocationKind::Chain, ch0.id.to_string())));
    assert!(
        written.contains(&(RevocationKind::Chain, made[0].id.to_string())),
        "the tokens acting in the session itself (the dashboard's) are revoked"
    );
    assert!(!written.contains(&(RevocationKind::Chain, ch1.id.to_string())));
    // Ending it again ends nothing and tells nothing.
    assert!(
        s.end_sessions(&o, &u.id, &one, now, teller())
            .await
            .unwrap()
            .is_empty()
    );

    // All but the newest: the middle one goes, the newest stays.
    let others = SessionSelect::AllBut(made[2].id.clone());
    let ended = s
        .end_sessions(&o, &u.id, &others, now, teller())
        .await
        .unwrap();
    assert_eq!(
        ended.iter().map(|x| &x.id).collect::<Vec<_>>(),
        vec![&made[1].id]
    );
    let (left, total) = s
        .list_sessions(&o, &u.id, Page::default(), now)
        .await
        .unwrap();
    assert_eq!(total, 1);
    assert_eq!(left[0].id, made[2].id);

    // `user.created`, then one `session.revoked` per session ended, the
    // session as it was, under the person's id.
    let e = settled(s, &o, 4).await;
    assert_eq!(
        kinds(&e[1..]),
        vec![
            ("application.created", c.id.to_string()),
            ("session.revoked", u.id.to_string()),
            ("session.revoked", u.id.to_string()),
        ]
    );
    let first = json(&e[2].event.object);
    assert_eq!(first["id"], made[0].id.as_str());
    assert_eq!(first["applications"], serde_json::json!([c.id.as_str()]));
    assert_eq!(json(&e[3].event.object)["id"], made[1].id.as_str());
}

pub async fn expired_sign_ins_stay_while_their_chains_live(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::from_millis(Timestamp::now().millis());
    let (u, made) =
        person_with_sessions(s, &o, "expiry@example.com", now, &[-7200, -7100], 120).await;
    let c = s.insert_client(&o, &client(None), teller()).await.unwrap();
    // Both browser sign-ins ended an hour after they began; a chain was
    // begun in the second.
    let ch = chain_in(s, &o, &c.id, &u.id, &made[1], now, (130, 131, "expchain")).await;
    let (listed, total) = s
        .list_sessions(&o, &u.id, Page::default(), now)
        .await
        .unwrap();
    assert_eq!(total, 1, "only the session whose chain lives is listed");
    assert_eq!(listed[0].id, made[1].id);
    while s.purge_expired(now, 100).await.unwrap() > 0 {}
    assert_eq!(
        s.resolve_session(&[120; 32]).await.unwrap(),
        None,
        "an ended sign-in without chains is purged"
    );
    assert!(
        s.resolve_session(&[121; 32]).await.unwrap().is_some(),
        "expiry revokes nothing: the session stays while its chain lives"
    );
    assert_eq!(
        s.live_chains(&o, &ChainFilter::Session(made[1].id.to_string()))
            .await
            .unwrap(),
        vec![ch.id.clone()]
    );
    // Once the chain is revoked, the session is neither listed nor kept.
    s.revoke_chain(&o, &ch.id, now, now.plus_seconds(3660))
        .await
        .unwrap();
    assert_eq!(
        s.list_sessions(&o, &u.id, Page::default(), now)
            .await
            .unwrap()
            .1,
        0
    );
    while s.purge_expired(now, 100).await.unwrap() > 0 {}
    assert_eq!(s.resolve_session(&[121; 32]).await.unwrap(), None);
}

pub async fn user_changes_end_sessions_as_d57_says(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::from_millis(Timestamp::now().millis());
    // Someone else stays admin, so the demotion below is allowed.
    s.insert_user(
        &o,
        &user("keeper@example.com", Role::Admin, UserStatus::Active, 1),
        teller(),
    )
    .await
    .unwrap();
    let admin = s
        .insert_user(
            &o,
            &user("demoted@example.com", Role::Admin, UserStatus::Active, 1),
            teller(),
        )
        .await
        .unwrap();
    let sess = session(&o, &admin.id, now, now.plus_seconds(3600));
    s.create_session(&o, &[140; 32], &sess, &[]).await.unwrap();
    let demote = UserPatch {
        role: Some(Role::Viewer),
        ..Default::default()
    };
    s.update_user(&o, &admin.id, &demote, now, teller())
        .await
        .unwrap();
    assert!(
        s.resolve_session(&[140; 32]).await.unwrap().is_some(),
        "a demotion keeps the browser sign-in"
    );
    let off = UserPatch {
        status: Some(UserStatus::Inactive),
        ..Default::default()
    };
    s.update_user(&o, &admin.id, &off, now, teller())
        .await
        .unwrap();
    assert_eq!(s.resolve_session(&[140; 32]).await.unwrap(), None);
    // user.created ×2, user.updated (demotion), then the deactivation:
    // session.revoked before user.updated (D54's cascade order).
    let e = settled(s, &o, 5).await;
    assert_eq!(
        kinds(&e[2..]),
        vec![
            ("user.updated", admin.id.to_string()),
            ("session.revoked", admin.id.to_string()),
            ("user.updated", admin.id.to_string()),
        ]
    );
    assert_eq!(json(&e[3].event.object)["id"], sess.id.as_str());
}

/// D57: a refresh of a chain begun in a session is a use of the session
/// (`last_seen_at`), written at most once a minute.
pub async fn a_refresh_is_a_use_of_its_session(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::from_millis(Timestamp::now().millis());
    let (u, made) = person_with_sessions(s, &o, "seen@example.com", now, &[-120], 150).await;
    let c = s.insert_client(&o, &client(None), teller()).await.unwrap();
    let ch = chain_in(s, &o, &c.id, &u.id, &made[0], now, (160, 161, "seenchain")).await;
    let rotate = |from: u8, to: u8, at: Timestamp| {
        let successor = rt(to, ch.id.as_str(), at);
        let client = c.id.clone();
        async move {
            s.rotate_refresh_token(
                &[from; 32],
                &client,
                at,
                b"sealed",
                at.plus_seconds(10),
                &successor,
                at.plus_seconds(3660),
            )
            .await
            .unwrap()
        }
    };
    assert!(matches!(rotate(161, 162, now).await, Rotated::Fresh(_)));
    let seen = |digest: u8| async move {
        s.resolve_session(&[digest; 32])
            .await
            .unwrap()
            .unwrap()
            .last_seen_at
    };
    assert_eq!(seen(150).await, now, "the refresh is the latest use");
    // Within the minute, another refresh writes nothing.
    assert!(matches!(
        rotate(162, 163, now.plus_seconds(30)).await,
        Rotated::Fresh(_)
    ));
    assert_eq!(seen(150).await, now);
    assert!(matches!(
        rotate(163, 164, now.plus_seconds(61)).await,
        Rotated::Fresh(_)
    ));
    assert_eq!(seen(150).await, now.plus_seconds(61));
}

/// D57: a code issued in a session that has ended since begins no chain
/// (the end would otherwise miss it).
pub async fn no_chain_begins_in_an_ended_session(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::from_millis(Timestamp::now().millis());
    let (u, made) = person_with_sessions(s, &o, "late@example.com", now, &[0], 170).await;
    let c = s.insert_client(&o, &client(None), teller()).await.unwrap();
    let code = AuthCode {
        sid: Some(made[0].id.to_string()),
        ..auth_code(171, &o, &c.id, &u.id, now)
    };
    s.insert_auth_code(&o, &code).await.unwrap();
    // Ended before the code is redeemed (here by another path than the
    // end's own code clean-up: the code was written after it).
    s.end_sessions(&o, &u.id, &SessionSelect::All, now, teller())
        .await
        .unwrap();
    s.insert_auth_code(
        &o,
        &AuthCode {
            digest: [172; 32],
            ..code.clone()
        },
    )
    .await
    .unwrap();
    let mut ch = chain_for(&o, &c.id, &u.id, now, "latechain");
    ch.sid = Some(made[0].id.to_string());
    assert_eq!(
        s.redeem_auth_code(&[172; 32], now, &ch, &rt(173, "latechain", now))
            .await
            .unwrap(),
        Redeemed::SessionEnded
    );
    assert!(s.resolve_refresh_token(&[173; 32]).await.unwrap().is_none());
    assert!(
        s.live_chains(&o, &ChainFilter::Session(made[0].id.to_string()))
            .await
            .unwrap()
            .is_empty()
    );
}
