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
            crate::conformance::teller(),
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
            crate::conformance::teller(),
        )
        .await;
    assert!(matches!(dup, Err(StoreError::Duplicate("sku"))), "{dup:?}");
    s.insert_product(
        &other,
        &product("Other", "SHIRT-BLUE", 1),
        Timestamp::from_millis(11),
        crate::conformance::teller(),
    )
    .await
    .unwrap();
    let q2 = s
        .insert_product(
            &o,
            &product("Red", "RED", 0),
            Timestamp::from_millis(12),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    assert_eq!(q2.status, ProductStatus::OutOfStock);
    // Renaming onto an existing sku is a duplicate too.
    let clash = ProductPatch {
        sku: Some(Sku::parse("SHIRT-BLUE").unwrap()),
        ..Default::default()
    };
    assert!(matches!(
        s.update_product(
            &o,
            &q2.id,
            &clash,
            Timestamp::now(),
            crate::conformance::teller()
        )
        .await,
        Err(StoreError::Duplicate("sku"))
    ));
    let zero = ProductPatch {
        stock: Some(0),
        ..Default::default()
    };
    let u = s
        .update_product(
            &o,
            &p.id,
            &zero,
            Timestamp::from_millis(20),
            crate::conformance::teller(),
        )
        .await
        .unwrap();
    assert_eq!(u.status, ProductStatus::OutOfStock);
    let bad = ProductPatch {
        status: Some(ProductStatus::Available),
        price: Some(5),
        ..Default::default()
    };
    assert!(matches!(
        s.update_product(
            &o,
            &p.id,
            &bad,
            Timestamp::now(),
            crate::conformance::teller()
        )
        .await,
        Err(StoreError::Rule(DomainError::InvalidStateTransition(_)))
    ));
    assert_eq!(s.get_product(&o, &p.id).await.unwrap().unwrap().price, 1999);
    let by_status = s
        .list_products(
            &o,
            &ProductFilter {
                status: Some(ProductStatus::OutOfStock),
            },
            Page::default(),
        )
        .await
        .unwrap();
    assert_eq!(by_status.total, 2);
    assert_eq!(by_status.items[0].id, q2.id, "newest first");
    assert!(matches!(
        s.delete_product(
            &other,
            &p.id,
            Timestamp::now(),
            crate::conformance::teller()
        )
        .await,
        Err(StoreError::NotFound)
    ));
    s.delete_product(&o, &p.id, Timestamp::now(), crate::conformance::teller())
        .await
        .unwrap();
    assert_eq!(s.get_product(&o, &p.id).await.unwrap(), None);
    assert_eq!(
        s.list_products(&o, &ProductFilter::default(), Page::default())
            .await
            .unwrap()
            .total,
        1
    );
}
