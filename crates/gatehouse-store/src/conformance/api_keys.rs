//! API keys.

use super::*;

pub async fn api_keys(s: &dyn Store) {
    let o = new_org(s).await;
    let other = new_org(s).await;
    let k = ApiKey {
        id: ApiKeyId::generate(),
        org: o.clone(),
        name: "ci".into(),
        scopes: ScopeSet::parse("products:read").unwrap(),
        created_at: Timestamp::from_millis(5),
        revoked_at: None,
    };
    s.insert_api_key(&k.org, &k, &[9; 32]).await.unwrap();
    assert_eq!(s.resolve_api_key(&[9; 32]).await.unwrap(), Some(k.clone()));
    assert_eq!(s.resolve_api_key(&[8; 32]).await.unwrap(), None);
    assert_eq!(
        s.operator_find_api_key(&k.id).await.unwrap(),
        Some(k.clone())
    );
    assert!(matches!(
        s.revoke_api_key(&other, &k.id, Timestamp::from_millis(7))
            .await,
        Err(StoreError::NotFound)
    ));
    let r = s
        .revoke_api_key(&o, &k.id, Timestamp::from_millis(7))
        .await
        .unwrap();
    assert_eq!(r.revoked_at, Some(Timestamp::from_millis(7)));
    let again = s
        .revoke_api_key(&o, &k.id, Timestamp::from_millis(9))
        .await
        .unwrap();
    assert_eq!(again.revoked_at, Some(Timestamp::from_millis(7)));
    assert_eq!(
        s.resolve_api_key(&[9; 32])
            .await
            .unwrap()
            .unwrap()
            .revoked_at,
        Some(Timestamp::from_millis(7))
    );
}
