//! What one ES256 signature costs with the crypto backend Gatehouse uses
//! (aws-lc-rs), the floor under every token the token endpoint issues.
//!
//! `cargo bench -p gatehouse-auth --bench signing`

use std::hint::black_box;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use criterion::{Criterion, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
    // About the size of a client-credentials token's header and payload.
    let msg = vec![b'a'; 330];
    c.bench_function("ES256 sign (aws-lc-rs, parsed key)", |b| {
        b.iter(|| black_box(pair.sign(&rng, black_box(&msg)).unwrap()))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
