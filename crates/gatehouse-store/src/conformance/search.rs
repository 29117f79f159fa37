//! What the search index reads (issue 16): the whole list in list order,
//! then every change after a mark, of this organization only.

use gatehouse_domain::search::{SearchKind, product_attrs, product_text, user_attrs, user_text};

use super::*;

fn keys<'a>(changed: impl IntoIterator<Item = &'a (i64, String)>) -> Vec<(i64, String)> {
    let mut keys: Vec<_> = changed.into_iter().cloned().collect();
    keys.sort();
    keys.dedup();
    keys
}

pub async fn search_changes_cover_every_write(s: &dyn Store) {
    let o = new_org(s).await;
    let other = new_org(s).await;
    let a = s
        .insert_user(
            &o,
            &user("Ada@x.io", Role::Admin, UserStatus::Active, 10),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let b = s
        .insert_user(
            &o,
            &user("bob@x.io", Role::Viewer, UserStatus::Active, 20),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let e = s
        .insert_user(
            &other,
            &user("eve@x.io", Role::Admin, UserStatus::Active, 30),
            crate::conformance::teller(),
        )
        .await
        .unwrap();

    // The whole list, in list order, as the index holds it; this organization only.
    let mark = s.search_mark().await.unwrap();
    let rows = s.search_rows(&o, SearchKind::Users).await.unwrap();
    let ids: Vec<_> = rows.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, [b.id.as_str(), a.id.as_str()]);
    assert_eq!(rows[1].created_at, 10);
    assert_eq!(rows[1].text, user_text(a.name.as_str(), a.email.as_str()));
    assert_eq!(rows[1].attrs, user_attrs(Role::Admin, UserStatus::Active));

    // A rename, a role change, a deletion: each reported with its key;
    // another organization's change is not.
    s.update_user(
        &o,
        &a.id,
        &UserPatch {
            name: Some(Name::parse("Ada L").unwrap()),
            ..Default::default()
        },
        Timestamp::now(),
        teller(),
    )
    .await
    .unwrap();
    s.delete_user_at(
        &o,
        &b.id,
        None,
        gatehouse_domain::Timestamp::now(),
        teller(),
    )
    .await
    .unwrap();
    s.update_user(
        &other,
        &e.id,
        &UserPatch {
            name: Some(Name::parse("Eve X").unwrap()),
            ..Default::default()
        },
        Timestamp::now(),
        teller(),
    )
    .await
    .unwrap();
    let first = s.search_changes(&o, SearchKind::Users, mark).await.unwrap();
    assert_eq!(
        keys(&first.changed),
        [(10, a.id.to_string()), (20, b.id.to_string())]
    );

    // A change after the new mark is reported from it; the rows read by id
    // are what the index puts back (the deleted one is gone).
    let c = s
        .insert_user(
            &o,
            &user("cy@x.io", Role::Editor, UserStatus::Active, 40),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let second = s
        .search_changes(&o, SearchKind::Users, first.mark)
        .await
        .unwrap();
    assert!(
        second.changed.contains(&(40, c.id.to_string())),
        "{second:?}"
    );
    assert!(
        second
            .changed
            .iter()
            .all(|(_, id)| [a.id.as_str(), b.id.as_str(), c.id.as_str()].contains(&id.as_str())),
        "only this organization's rows: {second:?}"
    );
    let wanted = [
        a.id.to_string(),
        b.id.to_string(),
        c.id.to_string(),
        e.id.to_string(),
    ];
    let mut now: Vec<_> = s
        .users_by_ids(&o, &wanted)
        .await
        .unwrap()
        .into_iter()
        .map(|u| (u.id.to_string(), u.name.as_str().to_owned()))
        .collect();
    now.sort();
    let mut want = vec![
        (a.id.to_string(), "Ada L".to_owned()),
        (c.id.to_string(), c.name.as_str().to_owned()),
    ];
    want.sort();
    assert_eq!(now, want, "by id: this organization's existing users only");

    // Products: an insert and a status change are reported; the row text
    // is the words of name and SKU.
    let mark = s.search_mark().await.unwrap();
    let p = s
        .insert_product(
            &o,
            &product("Blue Shirt", "SH-1", 0),
            Timestamp::from_millis(50),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    let rows = s.search_rows(&o, SearchKind::Products).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].text, product_text("Blue Shirt", "SH-1"));
    assert_eq!(rows[0].attrs, product_attrs(ProductStatus::OutOfStock));
    let changes = s
        .search_changes(&o, SearchKind::Products, mark)
        .await
        .unwrap();
    assert_eq!(keys(&changes.changed), [(50, p.id.to_string())]);
    assert!(
        s.search_changes(&other, SearchKind::Products, mark)
            .await
            .unwrap()
            .changed
            .is_empty()
    );
    assert!(
        s.products_by_ids(&other, &[p.id.to_string()])
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        s.products_by_ids(&o, &[p.id.to_string()])
            .await
            .unwrap()
            .len(),
        1
    );

    // Pruning forgets recorded changes older than the cut-off.
    assert!(
        s.prune_search_changes(Timestamp::now().plus_seconds(3600))
            .await
            .unwrap()
            >= 5
    );
    assert!(
        s.search_changes(&o, SearchKind::Users, 0)
            .await
            .unwrap()
            .changed
            .is_empty()
    );
}
