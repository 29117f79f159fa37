//! Products: the D17/D18 rules and search.

use super::*;

pub async fn products_roundtrip_and_rules(s: &dyn Store) {
    let o = new_org(s).await;
    let other = new_org(s).await;
    let p = s
        .insert_product(
            &o,
            &product("Blue Shirt", "SHIRT-BLUE", 3),
            Timestamp::from_millis(10),
        )
        .await
        .unwrap();
    assert_eq!(p.status, ProductStatus::Available);
    assert_eq!(s.get_product(&o, &p.id).await.unwrap(), Some(p.clone()));
    assert_eq!(s.get_product(&other, &p.id).await.unwrap(), None);
    let dup = s
        .insert_product(
            &o,
            &product("Other", "shirt-blue", 1),
            Timestamp::from_millis(11),
        )
        .await;
    assert!(matches!(dup, Err(StoreError::Duplicate("sku"))), "{dup:?}");
    s.insert_product(
        &other,
        &product("Other", "SHIRT-BLUE", 1),
        Timestamp::from_millis(11),
    )
    .await
    .unwrap();
    let q2 = s
        .insert_product(&o, &product("Red", "RED", 0), Timestamp::from_millis(12))
        .await
        .unwrap();
    assert_eq!(q2.status, ProductStatus::OutOfStock);
    // Renaming onto an existing sku is a duplicate too.
    let clash = ProductPatch {
        sku: Some(Sku::parse("SHIRT-BLUE").unwrap()),
        ..Default::default()
    };
    assert!(matches!(
        s.update_product(&o, &q2.id, &clash, Timestamp::now()).await,
        Err(StoreError::Duplicate("sku"))
    ));
    let zero = ProductPatch {
        stock: Some(0),
        ..Default::default()
    };
    let u = s
        .update_product(&o, &p.id, &zero, Timestamp::from_millis(20))
        .await
        .unwrap();
    assert_eq!(u.status, ProductStatus::OutOfStock);
    let bad = ProductPatch {
        status: Some(ProductStatus::Available),
        price: Some(5),
        ..Default::default()
    };
    assert!(matches!(
        s.update_product(&o, &p.id, &bad, Timestamp::now()).await,
        Err(StoreError::Rule(DomainError::InvalidStateTransition(_)))
    ));
    assert_eq!(s.get_product(&o, &p.id).await.unwrap().unwrap().price, 1999);
    let by_status = s
        .list_products(
            &o,
            &ProductFilter {
                status: Some(ProductStatus::OutOfStock),
                q: None,
            },
            Page::default(),
        )
        .await
        .unwrap();
    assert_eq!(by_status.total, 2);
    assert_eq!(by_status.items[0].id, q2.id, "newest first");
    assert!(matches!(
        s.delete_product(&other, &p.id).await,
        Err(StoreError::NotFound)
    ));
    s.delete_product(&o, &p.id).await.unwrap();
    assert_eq!(s.get_product(&o, &p.id).await.unwrap(), None);
    assert_eq!(
        s.list_products(&o, &ProductFilter::default(), Page::default())
            .await
            .unwrap()
            .total,
        1
    );
}

pub async fn product_search_by_word_prefix(s: &dyn Store) {
    let o = new_org(s).await;
    s.insert_product(
        &o,
        &product("Blue Shirt", "SH-1", 1),
        Timestamp::from_millis(1),
    )
    .await
    .unwrap();
    s.insert_product(
        &o,
        &product("Blue Jeans", "JEANS-BLUE-1", 1),
        Timestamp::from_millis(2),
    )
    .await
    .unwrap();
    s.insert_product(&o, &product("Shoe", "X_9", 1), Timestamp::from_millis(3))
        .await
        .unwrap();
    let o = &o;
    let find = |text: &str| {
        let f = ProductFilter {
            q: q(text),
            status: None,
        };
        async move {
            let l = s.list_products(o, &f, Page::default()).await.unwrap();
            assert_eq!(l.total as usize, l.items.len());
            l.items
                .into_iter()
                .map(|p| p.name.into_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(find("blue sh").await, vec!["Blue Shirt"]);
    assert_eq!(find("jeans-blue").await, vec!["Blue Jeans"]);
    assert_eq!(find("BLUE").await, vec!["Blue Jeans", "Blue Shirt"]);
    assert_eq!(find("sh").await, vec!["Shoe", "Blue Shirt"]);
    assert_eq!(find("lue").await, Vec::<String>::new());
    assert_eq!(find("x 9").await, vec!["Shoe"]);
    // A query with no words filters nothing, like an empty one.
    assert_eq!(
        find("\"*()").await,
        vec!["Shoe", "Blue Jeans", "Blue Shirt"]
    );
}

/// D6 (continued): a `q` containing a control character matches nothing,
/// an empty page with `total: 0`, on every list (users and products, offset
/// and cursor pages), whatever else it holds.
pub async fn control_characters_in_q_match_nothing(s: &dyn Store) {
    let o = new_org(s).await;
    let u = s
        .insert_user(
            &o,
            &user("ada@example.com", Role::Editor, UserStatus::Active, 1),
        )
        .await
        .unwrap();
    s.insert_product(&o, &product("Ada blue shirt", "ADA-1", 3), Timestamp::now())
        .await
        .unwrap();
    for bad in [
        "\u{1}",
        "\t",
        "\u{7f}",
        "\0",
        "\n",
        "\u{9f}",
        "ada\u{1}",
        "ada\t",
        "a\0da",
        "ada\u{7f}",
        "blue\tshirt",
    ] {
        let uf = UserFilter {
            q: q(bad),
            ..Default::default()
        };
        let users = s.list_users(&o, &uf, Page::default()).await.unwrap();
        assert_eq!((users.items.len(), users.total), (0, 0), "users, q={bad:?}");
        let after = s.list_users_after(&o, &uf, None, 10).await.unwrap();
        assert_eq!(after.map(|v| v.len()), Some(0), "users after, q={bad:?}");
        let after = s.list_users_after(&o, &uf, Some(&u.id), 10).await.unwrap();
        assert_eq!(
            after.map(|v| v.len()),
            Some(0),
            "users after a cursor, q={bad:?}"
        );
        let pf = ProductFilter {
            q: q(bad),
            ..Default::default()
        };
        let products = s.list_products(&o, &pf, Page::default()).await.unwrap();
        assert_eq!(
            (products.items.len(), products.total),
            (0, 0),
            "products, q={bad:?}"
        );
        let after = s.list_products_after(&o, &pf, None, 10).await.unwrap();
        assert_eq!(after.map(|v| v.len()), Some(0), "products after, q={bad:?}");
    }
    // The same texts without the control character do match.
    let uf = UserFilter {
        q: q("ada"),
        ..Default::default()
    };
    assert_eq!(
        s.list_users(&o, &uf, Page::default()).await.unwrap().total,
        1
    );
    let pf = ProductFilter {
        q: q("blue shirt"),
        ..Default::default()
    };
    assert_eq!(
        s.list_products(&o, &pf, Page::default())
            .await
            .unwrap()
            .total,
        1
    );
}
