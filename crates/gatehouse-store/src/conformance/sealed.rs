//! D23 (continued): the values sealed under the master key, paged in
//! storage order and re-sealed only over the value the rotation read; the
//! rotation under way.

use gatehouse_domain::effect;

use super::mfa::{mail, person, totp};
use super::*;
use crate::{KeyHolder, MasterKeyRotation, SealedAt, SealedKind};

pub async fn sealed_values_are_paged_and_resealed_over_what_was_read(s: &dyn Store) {
    for kind in SealedKind::ALL {
        assert!(s.sealed_values(kind, None, 10).await.unwrap().is_empty());
    }
    for (i, kid) in ["k1", "k2", "k3"].into_iter().enumerate() {
        s.insert_signing_key(&SigningKeyRecord {
            kid: kid.into(),
            private_key_encrypted: vec![i as u8; 40],
            public_key: vec![4; 65],
            created_at: Timestamp::from_millis(1),
            activates_at: Timestamp::from_millis(1),
            expires_at: None,
        })
        .await
        .unwrap();
    }
    // Pages of two, each after the last of the one before.
    let first = s
        .sealed_values(SealedKind::SigningKey, None, 2)
        .await
        .unwrap();
    assert_eq!(
        first.iter().map(|v| v.at.clone()).collect::<Vec<_>>(),
        [
            SealedAt::SigningKey { kid: "k1".into() },
            SealedAt::SigningKey { kid: "k2".into() }
        ]
    );
    assert_eq!(first[1].sealed, vec![1; 40]);
    let second = s
        .sealed_values(SealedKind::SigningKey, Some(&first[1].at), 2)
        .await
        .unwrap();
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].at, SealedAt::SigningKey { kid: "k3".into() });
    assert!(
        s.sealed_values(SealedKind::SigningKey, Some(&second[0].at), 2)
            .await
            .unwrap()
            .is_empty()
    );

    // A re-seal lands only over the value read.
    let k2 = &first[1];
    assert!(!s.reseal(&k2.at, &[9; 40], &[7; 40]).await.unwrap());
    assert!(s.reseal(&k2.at, &k2.sealed, &[7; 40]).await.unwrap());
    assert!(!s.reseal(&k2.at, &k2.sealed, &[8; 40]).await.unwrap());
    let keys = s.signing_keys().await.unwrap();
    let stored = keys.iter().find(|k| k.kid == "k2").unwrap();
    assert_eq!(stored.private_key_encrypted, vec![7; 40]);

    // A TOTP seed names its organization, person and factor.
    let o = new_org(s).await;
    let u = person(s, &o, "sealed@example.com").await;
    let t = totp(1_000, 5);
    let fx = effect::of_totp_enrolment(teller(), &u.id, t.clone(), None, &mail());
    s.write_mfa(&o, &fx, Timestamp::from_millis(1_000), teller())
        .await
        .unwrap();
    let seeds = s
        .sealed_values(SealedKind::TotpSeed, None, 10)
        .await
        .unwrap();
    assert_eq!(seeds.len(), 1);
    assert_eq!(
        seeds[0].at,
        SealedAt::TotpSeed {
            org: o.to_string(),
            user: u.id.to_string(),
            factor: t.factor.id.to_string(),
        }
    );
    assert_eq!(seeds[0].sealed, t.sealed_secret);
    assert!(
        s.reseal(&seeds[0].at, &t.sealed_secret, &[6; 48])
            .await
            .unwrap()
    );
    let now = s.factors(&o, &u.id).await.unwrap().totp.unwrap();
    assert_eq!(now.sealed_secret, vec![6; 48]);
    assert_eq!(now.last_step, t.last_step, "only the seed changes");

    // The recovery-code key.
    s.sealed_key("recovery_codes", &[3; 60]).await.unwrap();
    let sealed = s
        .sealed_values(SealedKind::SealedKey, None, 10)
        .await
        .unwrap();
    assert_eq!(
        sealed[0].at,
        SealedAt::SealedKey {
            name: "recovery_codes".into()
        }
    );
    assert!(s.reseal(&sealed[0].at, &[3; 60], &[4; 60]).await.unwrap());
    assert_eq!(
        s.sealed_key("recovery_codes", &[5; 60]).await.unwrap(),
        vec![4; 60],
        "the re-sealed key is the one kept"
    );
}

pub async fn one_master_key_rotation_is_under_way_at_most(s: &dyn Store) {
    assert_eq!(s.master_key_rotation().await.unwrap(), None);
    let a = MasterKeyRotation {
        next_id: "aaaa".into(),
        next_sealed: vec![1; 60],
        started_at: Timestamp::from_millis(5_000),
    };
    // Begun when none is under way, once: another is refused, not recorded.
    assert!(s.begin_master_key_rotation(&a).await.unwrap());
    let b = MasterKeyRotation {
        next_id: "bbbb".into(),
        next_sealed: vec![2; 60],
        started_at: Timestamp::from_millis(6_000),
    };
    assert!(!s.begin_master_key_rotation(&b).await.unwrap());
    assert_eq!(s.master_key_rotation().await.unwrap(), Some(a.clone()));
    // Ending another rotation changes nothing.
    assert!(!s.end_master_key_rotation("bbbb").await.unwrap());
    assert_eq!(s.master_key_rotation().await.unwrap(), Some(a));
    assert!(s.end_master_key_rotation("aaaa").await.unwrap());
    assert_eq!(s.master_key_rotation().await.unwrap(), None);
    assert!(!s.end_master_key_rotation("aaaa").await.unwrap());
    assert!(s.begin_master_key_rotation(&b).await.unwrap());
    assert!(s.end_master_key_rotation("bbbb").await.unwrap());
}

pub async fn key_holders_say_what_they_hold_and_old_ones_go(s: &dyn Store) {
    let t = |secs: i64| Timestamp::from_millis(1_000_000_000 + secs * 1000);
    s.record_key_holder("mkh_a", &["k1".into()], t(0))
        .await
        .unwrap();
    s.record_key_holder("mkh_b", &["k2".into(), "k1".into()], t(10))
        .await
        .unwrap();
    let all = s.key_holders(t(0)).await.unwrap();
    assert_eq!(
        all,
        [
            KeyHolder {
                holder: "mkh_a".into(),
                key_ids: vec!["k1".into()],
                seen_at: t(0),
            },
            KeyHolder {
                holder: "mkh_b".into(),
                key_ids: vec!["k2".into(), "k1".into()],
                seen_at: t(10),
            }
        ]
    );
    // Only those seen since.
    assert_eq!(s.key_holders(t(5)).await.unwrap().len(), 1);
    // A holder's record is replaced; one not seen for a day is removed.
    s.record_key_holder("mkh_b", &["k2".into()], t(86_400 + 5))
        .await
        .unwrap();
    let all = s.key_holders(t(-1)).await.unwrap();
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].key_ids, vec!["k2".to_owned()]);
}
