//! Revocations written by user changes.

use super::*;

pub async fn revocations_follow_user_changes(s: &dyn Store) {
    let o = new_org(s).await;
    let now = Timestamp::now();
    let start = s
        .revocations_since(0, now)
        .await
        .unwrap()
        .last()
        .map_or(0, |r| r.id);
    let a = s
        .insert_user(
            &o,
            &user("a@example.com", Role::Admin, UserStatus::Active, 1),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let e = s
        .insert_user(
            &o,
            &user("e@example.com", Role::Editor, UserStatus::Active, 2),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let rename = UserPatch {
        name: Some(Name::parse("Renamed").unwrap()),
        ..Default::default()
    };
    s.update_user(&o, &e.id, &rename, now, teller())
        .await
        .unwrap();
    assert!(
        s.revocations_since(start, now).await.unwrap().is_empty(),
        "a rename revokes nothing"
    );
    let demote = UserPatch {
        role: Some(Role::Viewer),
        ..Default::default()
    };
    s.update_user(&o, &e.id, &demote, now, teller())
        .await
        .unwrap();
    let off = UserPatch {
        status: Some(UserStatus::Inactive),
        ..Default::default()
    };
    let v = s
        .insert_user(
            &o,
            &user("v@example.com", Role::Viewer, UserStatus::Active, 3),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    s.update_user(&o, &v.id, &off, now, teller()).await.unwrap();
    s.delete_user_at(&o, &a.id, None, now, teller())
        .await
        .unwrap_err(); // last admin
    s.delete_user_at(&o, &v.id, None, now, teller())
        .await
        .unwrap();
    let revs = s.revocations_since(start, now).await.unwrap();
    let subjects: Vec<&str> = revs.iter().map(|r| r.subject.as_str()).collect();
    assert_eq!(subjects, vec![e.id.as_str(), v.id.as_str(), v.id.as_str()]);
    assert!(revs.iter().all(|r| r.kind == RevocationKind::User
        && r.cutoff == now.unix_seconds()
        && r.expires_at > now));
    assert!(revs.windows(2).all(|w| w[0].id < w[1].id));
    let id = s
        .insert_revocation(&crate::NewRevocation::new(
            RevocationKind::Jti,
            "jti-1",
            now.unix_seconds(),
            now.plus_seconds(60),
        ))
        .await
        .unwrap();
    assert_eq!(
        s.revocations_since(id - 1, now).await.unwrap()[0].subject,
        "jti-1"
    );
    assert!(
        s.revocations_since(id - 1, now.plus_seconds(61))
            .await
            .unwrap()
            .is_empty(),
        "expired revocations are not returned"
    );
}
