//! D23 (continued), D3 (revised): the values stored sealed under the master
//! key, named so `gatehouse master-key rotate` can reach every one of them
//! and the associated data each is sealed with is built from the same
//! fields wherever it is sealed or opened.

/// The kinds of values sealed under the master key, in the order a
/// rotation re-seals them (signing keys first: a server starting during a
/// rotation needs them before anything else).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SealedKind {
    /// D23: the private half of a token signing key.
    SigningKey,
    /// D24: a refresh's successor pair, kept for the grace window.
    SuccessorPair,
    /// D50: a kept idempotent response that holds a secret.
    KeptResponse,
    /// D55: a webhook endpoint's signing secret.
    WebhookSecret,
    /// D55: the previous signing secret, during a rotation's grace.
    WebhookPreviousSecret,
    /// D56: a TOTP factor's seed.
    TotpSeed,
    /// D56: a key kept sealed (the recovery-code key).
    SealedKey,
}

impl SealedKind {
    pub const ALL: [SealedKind; 7] = [
        SealedKind::SigningKey,
        SealedKind::SuccessorPair,
        SealedKind::KeptResponse,
        SealedKind::WebhookSecret,
        SealedKind::WebhookPreviousSecret,
        SealedKind::TotpSeed,
        SealedKind::SealedKey,
    ];

    /// The name reports and `--json` use.
    pub fn as_str(self) -> &'static str {
        match self {
            SealedKind::SigningKey => "signing_keys",
            SealedKind::SuccessorPair => "successor_pairs",
            SealedKind::KeptResponse => "kept_responses",
            SealedKind::WebhookSecret => "webhook_secrets",
            SealedKind::WebhookPreviousSecret => "webhook_previous_secrets",
            SealedKind::TotpSeed => "totp_seeds",
            SealedKind::SealedKey => "sealed_keys",
        }
    }
}

/// Where one sealed value is stored, with the fields its associated data
/// is made of (ids as storage holds them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SealedAt {
    SigningKey {
        kid: String,
    },
    SuccessorPair {
        digest: Vec<u8>,
    },
    KeptResponse {
        row: i64,
        org: String,
        lineage: String,
        key: String,
    },
    WebhookSecret {
        org: String,
        endpoint: String,
        previous: bool,
    },
    TotpSeed {
        org: String,
        user: String,
        factor: String,
    },
    SealedKey {
        name: String,
    },
}

impl SealedAt {
    pub fn kind(&self) -> SealedKind {
        match self {
            SealedAt::SigningKey { .. } => SealedKind::SigningKey,
            SealedAt::SuccessorPair { .. } => SealedKind::SuccessorPair,
            SealedAt::KeptResponse { .. } => SealedKind::KeptResponse,
            SealedAt::WebhookSecret {
                previous: false, ..
            } => SealedKind::WebhookSecret,
            SealedAt::WebhookSecret { previous: true, .. } => SealedKind::WebhookPreviousSecret,
            SealedAt::TotpSeed { .. } => SealedKind::TotpSeed,
            SealedAt::SealedKey { .. } => SealedKind::SealedKey,
        }
    }
}

/// One sealed value as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedValue {
    pub at: SealedAt,
    pub sealed: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_listed_once_and_named_apart() {
        let names: std::collections::HashSet<_> =
            SealedKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names.len(), SealedKind::ALL.len());
        let at = SealedAt::WebhookSecret {
            org: "org_a".into(),
            endpoint: "we_a".into(),
            previous: true,
        };
        assert_eq!(at.kind(), SealedKind::WebhookPreviousSecret);
    }
}
