//! Signing keys.

use super::*;

pub async fn signing_keys(s: &dyn Store) {
    assert!(s.signing_keys().await.unwrap().is_empty());
    let k = SigningKeyRecord {
        kid: "k1".into(),
        private_key_encrypted: vec![1, 2, 3],
        public_key: vec![4; 65],
        created_at: Timestamp::from_millis(1),
        activates_at: Timestamp::from_millis(1),
        expires_at: None,
    };
    s.insert_signing_key(&k).await.unwrap();
    assert_eq!(s.signing_keys().await.unwrap(), vec![k]);
}
