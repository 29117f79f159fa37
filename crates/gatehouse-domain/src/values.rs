//! Validated value types (D8). Each `parse` returns the issue text on failure,
//! which the server reports as a `details` item of a `VALIDATION_ERROR`.

use std::fmt;

use caseless::Caseless;
use email_address::EmailAddress;
use serde::Serialize;
use unicode_normalization::UnicodeNormalization;

macro_rules! string_value {
    ($name:ident) => {
        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
            pub fn into_string(self) -> String {
                self.0
            }
            /// Wraps a value read back from storage, which was validated when written.
            pub fn from_trusted(s: String) -> Self {
                Self(s)
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }
    };
}

/// A display name: 1–200 characters after trimming, no control characters (D8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Name(String);
string_value!(Name);

impl Name {
    /// [`Name::parse`]'s rule in words, for a form (issue 32).
    pub const RULE: &'static str = "A name of 1 to 200 characters, without control characters.";

    pub fn parse(raw: &str) -> Result<Self, String> {
        let s = raw.trim();
        let n = s.chars().count();
        if n == 0 {
            return Err("must not be empty".into());
        }
        if n > 200 {
            return Err("must be at most 200 characters".into());
        }
        if s.chars().any(char::is_control) {
            return Err("must not contain control characters".into());
        }
        Ok(Self(s.to_owned()))
    }
}

/// An e-mail address (D8 revised): Unicode NFC, trimmed, at most 254
/// characters, one `@`, a dot in the domain, and deliverable: the local part
/// and the domain's IDNA A-label pass the address rules of the delivery
/// library (lettre 0.11.23, which checks them with `email_address` and
/// converts the domain with `idna::domain_to_ascii`). Compared through
/// [`Email::normalized`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Email(String);
string_value!(Email);

impl Email {
    /// [`Email::parse`]'s rule in words, for a form (issue 32).
    pub const RULE: &'static str =
        "An e-mail address that can receive mail, such as ada@example.com.";

    pub fn parse(raw: &str) -> Result<Self, String> {
        let email = Self::parse_for_lookup(raw)?;
        let (local, domain) = (email.local_part(), email.domain());
        // D8 (revised): what the mailer would refuse is refused here, never
        // left in the outbox. Same rule as lettre's `Address::check_user`.
        if !EmailAddress::is_valid_local_part(local) {
            return Err(
                "the part before @ cannot be delivered: at most 64 bytes of letters, digits, \
                 and !#$%&'*+-/=?^_`{|}~, with single dots between them"
                    .into(),
            );
        }
        if deliverable_domain(domain).is_none() {
            return Err("the domain cannot be delivered: it must be a valid domain name".into());
        }
        Ok(email)
    }

    /// An address as typed to find an account (sign-in): trimmed, NFC and
    /// D8's shape rules, without the delivery rules of [`Email::parse`], so
    /// an account whose stored address the mailer refuses (created through
    /// the CLI with a password) can still sign in. Never for storing.
    pub fn parse_for_lookup(raw: &str) -> Result<Self, String> {
        const MSG: &str = "must be an e-mail address such as name@example.com";
        // D8 (revised): NFC first, so `jose\u{301}` and `jos\u{e9}` are one
        // stored form, and the checks below see what is stored.
        let s: String = raw.trim().nfc().collect();
        if s.is_empty() {
            return Err(MSG.into());
        }
        if s.chars().count() > 254 {
            return Err("must be at most 254 characters".into());
        }
        if s.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(MSG.into());
        }
        let mut parts = s.split('@');
        let (Some(local), Some(domain), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(MSG.into());
        };
        if local.is_empty()
            || domain.is_empty()
            || !domain.contains('.')
            || domain.starts_with('.')
            || domain.ends_with('.')
            || domain.contains("..")
        {
            return Err(MSG.into());
        }
        Ok(Self(s))
    }

    /// The part before the `@`.
    pub fn local_part(&self) -> &str {
        self.0.rsplit_once('@').map_or(&self.0, |(l, _)| l)
    }

    /// The part after the `@`, as stored (Unicode, if it was given so).
    pub fn domain(&self) -> &str {
        self.0.rsplit_once('@').map_or("", |(_, d)| d)
    }

    /// The domain as the mailer sends it (D8 revised): its lowercase IDNA
    /// A-label (`bücher.example` → `xn--bcher-kva.example`). The lower-cased
    /// domain for an address that has none (from [`Email::parse_for_lookup`]
    /// or [`Email::from_trusted`]; the mailer then refuses it).
    pub fn ascii_domain(&self) -> String {
        let d = self.domain();
        deliverable_domain(d).unwrap_or_else(|| d.to_lowercase())
    }

    /// The address as the mailer sends it (D8 revised, D30): the local part
    /// unchanged (UTF-8, sent with SMTPUTF8 when not ASCII), `@`, the
    /// domain's A-label.
    pub fn delivery_form(&self) -> String {
        format!("{}@{}", self.local_part(), self.ascii_domain())
    }

    /// The uniqueness and look-up key (D8 revised, stored as `email_norm`):
    /// the full Unicode case folding of the local part, compared canonically
    /// (NFD, fold, then NFC, as Unicode's canonical caseless match does, so
    /// the key does not depend on the stored form's normalization), `@`, the
    /// lowercase A-label of the domain. `JOSÉ`, `jose\u{301}` and `josé` have
    /// one key, and so do `STRASSE` and `straße`. For an ASCII address this
    /// is plain lower case.
    pub fn normalized(&self) -> String {
        let local = fold_case(self.local_part());
        if self.0.contains('@') {
            format!("{local}@{}", self.ascii_domain())
        } else {
            local
        }
    }
}

/// Full Unicode case folding, compared canonically: NFD, fold, then NFC (as
/// Unicode's canonical caseless match does), so the result does not depend
/// on the input's normalization. The fold of an e-mail's local part in
/// [`Email::normalized`] (D8 revised); for ASCII it is plain lower case.
pub fn fold_case(s: &str) -> String {
    s.nfd().default_case_fold().nfc().collect()
}

/// The lowercase IDNA A-label of `domain` if lettre accepts it as an address
/// domain (the check its `Address::check_domain` applies after converting).
/// Domain literals (`[192.0.2.1]`) are not taken: invitations go to names.
fn deliverable_domain(domain: &str) -> Option<String> {
    if domain.starts_with('[') {
        return None;
    }
    let ascii = idna::domain_to_ascii(domain).ok()?;
    (!ascii.is_empty()
        && ascii.contains('.')
        && !ascii.starts_with('[')
        && EmailAddress::is_valid_domain(&ascii))
    .then_some(ascii)
}

/// A stock-keeping unit: 1–64 of `A-Z a-z 0-9 - _ .` (D8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sku(String);
string_value!(Sku);

impl Sku {
    /// [`Sku::parse`]'s rule in words, for a form (issue 32).
    pub const RULE: &'static str = "1 to 64 letters (A to Z, a to z), digits, dashes, underscores or dots, unique in the catalog.";

    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw.is_empty() || raw.len() > 64 {
            return Err("must be 1 to 64 characters".into());
        }
        if !raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            return Err("may contain only A-Z, a-z, 0-9, '-', '_' and '.'".into());
        }
        Ok(Self(raw.to_owned()))
    }
}

/// Search text for `q`: at most 200 characters (D8). `%` and `_` match
/// themselves (D9): this is literal text, never a pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchText(String);
string_value!(SearchText);

impl SearchText {
    /// `Ok(None)` for an empty `q`, which filters nothing.
    pub fn parse(raw: &str) -> Result<Option<Self>, String> {
        if raw.chars().count() > 200 {
            return Err("must be at most 200 characters".into());
        }
        if raw.is_empty() {
            return Ok(None);
        }
        Ok(Some(Self(raw.to_owned())))
    }

    /// The words of the text for product search (D17): runs of letters and
    /// digits, lower-cased.
    pub fn words(&self) -> Vec<String> {
        words(&self.0)
    }

    /// D6 (continued): a `q` containing a control character matches nothing
    /// (an empty page with `total: 0`) on every backend; no stored name,
    /// e-mail or SKU holds one (D8). Every list query asks this first.
    pub fn matches_nothing(&self) -> bool {
        self.0.chars().any(char::is_control)
    }
}

/// Runs of letters and digits, lower-cased (D17).
pub fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// An amount (`price`, `stock`): an integer from 0 to 2^53−1 (D8).
pub const MAX_AMOUNT: i64 = (1 << 53) - 1;

/// [`parse_amount`]'s rule in words, for a form's stock (issue 32).
pub const STOCK_RULE: &str = "A whole number, 0 or more.";

pub fn parse_amount(v: i64) -> Result<i64, String> {
    if (0..=MAX_AMOUNT).contains(&v) {
        Ok(v)
    } else {
        Err("must be an integer from 0 to 9007199254740991".into())
    }
}

/// A price as people read and type it (issue 32): organizations have no
/// currency, so a price is an integer of minor units shown with two
/// decimals and no symbol (`1999` is `19.99`).
pub mod price_text {
    use super::MAX_AMOUNT;

    /// [`parse`]'s rule in words, for a form to show before it is sent.
    pub const RULE: &str =
        "A price such as 19.99: digits, with at most two after the point, and no currency symbol.";

    pub fn format(minor: i64) -> String {
        let sign = if minor < 0 { "-" } else { "" };
        let m = minor.unsigned_abs();
        format!("{sign}{}.{:02}", m / 100, m % 100)
    }

    /// `19.99`, `19.9`, `19` or `.5` as minor units; anything else (a sign,
    /// a symbol, separators, a third decimal, more than 2^53−1 minor units)
    /// is refused with [`RULE`].
    pub fn parse(text: &str) -> Result<i64, &'static str> {
        let t = text.trim();
        let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if (whole.is_empty() && frac.is_empty())
            || !digits(whole)
            || !digits(frac)
            || frac.len() > 2
            || (t.ends_with('.') && whole.is_empty())
        {
            return Err(RULE);
        }
        let whole: i64 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| RULE)?
        };
        let cents: i64 = match frac.len() {
            0 => 0,
            1 => frac.parse::<i64>().map_err(|_| RULE)? * 10,
            _ => frac.parse().map_err(|_| RULE)?,
        };
        whole
            .checked_mul(100)
            .and_then(|w| w.checked_add(cents))
            .filter(|v| *v <= MAX_AMOUNT)
            .ok_or(RULE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_read_and_show_with_two_decimals() {
        use price_text::{format, parse};
        assert_eq!(format(1999), "19.99");
        assert_eq!(format(5), "0.05");
        assert_eq!(format(0), "0.00");
        assert_eq!(format(MAX_AMOUNT), "90071992547409.91");
        for (text, minor) in [
            ("19.99", 1999),
            ("19.9", 1990),
            ("19", 1900),
            (" 0.05 ", 5),
            (".5", 50),
            ("19.", 1900),
            ("90071992547409.91", MAX_AMOUNT),
        ] {
            assert_eq!(parse(text), Ok(minor), "{text}");
            assert_eq!(parse(&format(minor)), Ok(minor), "round trip of {minor}");
        }
        for bad in [
            "",
            ".",
            "-1",
            "+1",
            "1,99",
            "19.999",
            "$19.99",
            "19.99 EUR",
            "1e3",
            "90071992547409.92",
            "99999999999999999999",
        ] {
            assert_eq!(parse(bad), Err(price_text::RULE), "{bad:?}");
        }
    }

    #[test]
    fn a_control_character_in_q_matches_nothing() {
        let q = |s: &str| SearchText::parse(s).unwrap().unwrap();
        for bad in ["\u{0}", "a\u{1}b", "\t", "ada\n", "\u{7f}", "x\u{9f}"] {
            assert!(q(bad).matches_nothing(), "{bad:?}");
        }
        for good in ["ada", "a b", "é-ü", "100%_"] {
            assert!(!q(good).matches_nothing(), "{good:?}");
        }
    }

    #[test]
    fn names_are_trimmed_and_bounded() {
        assert_eq!(Name::parse("  Ada  ").unwrap().as_str(), "Ada");
        assert!(Name::parse("   ").is_err());
        assert!(Name::parse(&"x".repeat(200)).is_ok());
        assert!(Name::parse(&"x".repeat(201)).is_err());
        assert!(Name::parse("a\u{7}b").is_err());
    }

    #[test]
    fn emails_need_one_at_and_a_dotted_domain() {
        assert_eq!(
            Email::parse(" A@Example.com ").unwrap().as_str(),
            "A@Example.com"
        );
        assert_eq!(
            Email::parse("A@Example.com").unwrap().normalized(),
            "a@example.com"
        );
        for bad in ["a", "a@b", "a@@b.c", "@b.c", "a@.c", "a b@c.d", "a@b.c@d.e"] {
            assert!(Email::parse(bad).is_err(), "{bad}");
        }
        let long = format!("{}@example.com", "a".repeat(250));
        assert!(Email::parse(&long).is_err());
    }

    #[test]
    fn emails_are_nfc_and_keyed_by_full_case_folding() {
        // D8 (revised): the stored form is NFC, trimmed.
        let nfd = Email::parse(" jose\u{301}@b.example.com ").unwrap();
        assert_eq!(nfd.as_str(), "jos\u{e9}@b.example.com");
        let key = |s: &str| Email::parse(s).unwrap().normalized();
        // One key for the composed, decomposed and upper-case forms …
        assert_eq!(key("jose\u{301}@x.com"), "jos\u{e9}@x.com");
        assert_eq!(key("JOS\u{c9}@x.com"), key("jos\u{e9}@x.com"));
        assert_eq!(key("JOSE\u{301}@X.COM"), key("jos\u{e9}@x.com"));
        // … full folding, not lower-casing: ß and SS are one address …
        assert_eq!(key("stra\u{df}e@x.com"), "strasse@x.com");
        assert_eq!(key("STRASSE@x.com"), key("stra\u{df}e@x.com"));
        // … and the domain compares as its lowercase A-label.
        assert_eq!(key("a@B\u{dc}CHER.example"), "a@xn--bcher-kva.example");
        assert_eq!(key("a@b\u{fc}cher.example"), key("a@xn--bcher-kva.example"));
        assert_ne!(key("jose@x.com"), key("jos\u{e9}@x.com"));
    }

    #[test]
    fn delivery_form_has_the_a_label_and_the_local_part_unchanged() {
        let e = Email::parse("J\u{f6}rg@B\u{fc}cher.Example").unwrap();
        assert_eq!(e.as_str(), "J\u{f6}rg@B\u{fc}cher.Example");
        assert_eq!(e.local_part(), "J\u{f6}rg");
        assert_eq!(e.domain(), "B\u{fc}cher.Example");
        assert_eq!(e.ascii_domain(), "xn--bcher-kva.example");
        assert_eq!(e.delivery_form(), "J\u{f6}rg@xn--bcher-kva.example");
        let ascii = Email::parse("Ada@Example.COM").unwrap();
        assert_eq!(ascii.delivery_form(), "Ada@example.com");
    }

    #[test]
    fn emails_the_mailer_would_refuse_are_invalid() {
        // D8 (revised): lettre's local-part and domain rules.
        for bad in [
            "j\u{301}@x.com", // a combining mark NFC cannot compose
            "\u{301}a@x.com", // starts with a combining mark
            "a..b@x.com",     // empty atom
            ".a@x.com",       // leading dot
            "a.@x.com",       // trailing dot
            "a(b)@x.com",     // not atext
            "a<b@x.com",      // not atext
            "a\"b@x.com",     // a lone quote
            "a@-x.com",       // a label starting with '-'
            "a@x-.com",       // a label ending with '-'
            "a@x_y.com-",     // ends with '-'
            "a@[192.0.2.1]",  // domain literal
            "a@xn--a.com",    // not a valid A-label
            "a@\u{301}x.com", // a label starting with a combining mark
        ] {
            assert!(Email::parse(bad).is_err(), "{bad:?}");
        }
        let long_local = format!("{}@x.com", "a".repeat(65));
        assert!(Email::parse(&long_local).is_err());
        // 64 bytes, not characters: 33 two-byte letters are too many.
        assert!(Email::parse(&format!("{}@x.com", "\u{e9}".repeat(33))).is_err());
        assert!(Email::parse(&format!("{}@x.com", "\u{e9}".repeat(32))).is_ok());
        let long_label = format!("a@{}.com", "b".repeat(64));
        assert!(Email::parse(&long_label).is_err());
        // Sign-in still finds an account stored with such an address: the
        // look-up parse keeps only the shape rules, and the key of an ASCII
        // address is its lower case.
        let typed = Email::parse_for_lookup(" A..B@X.com ").unwrap();
        assert_eq!(typed.normalized(), "a..b@x.com");
        assert!(Email::parse_for_lookup("a@b").is_err());
        for good in [
            "o'brien+tag@x.com",
            "\"quoted\"@x.com",
            "\u{4f8b}\u{5b50}@\u{4f8b}\u{5b50}.\u{6d4b}\u{8bd5}",
            "user@b\u{fc}cher.example",
            "1@1.2.3.4",
        ] {
            assert!(Email::parse(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn skus_allow_only_their_alphabet() {
        assert!(Sku::parse("JEANS-BLUE_1.0").is_ok());
        assert!(Sku::parse("").is_err());
        assert!(Sku::parse("a b").is_err());
        assert!(Sku::parse(&"a".repeat(65)).is_err());
    }

    #[test]
    fn words_split_on_non_alphanumerics() {
        assert_eq!(words("jeans-blue"), vec!["jeans", "blue"]);
        assert_eq!(words("Blue  Shirt!"), vec!["blue", "shirt"]);
    }

    #[test]
    fn amounts_are_bounded() {
        assert!(parse_amount(0).is_ok());
        assert!(parse_amount(MAX_AMOUNT).is_ok());
        assert!(parse_amount(-1).is_err());
        assert!(parse_amount(MAX_AMOUNT + 1).is_err());
    }
}

#[cfg(test)]
mod email_properties {
    use proptest::prelude::*;

    use super::Email;

    /// Address-like strings: local parts mixing ASCII, composed and
    /// decomposed accents, ß and dots; Unicode and ASCII domains.
    fn address_like() -> impl Strategy<Value = String> {
        (
            "[a-zA-Z0-9.+_'\u{e9}\u{c9}\u{301}\u{df}\u{130}\u{3a3}\u{3c2}\u{4f8b}\"-]{0,12}",
            "[a-zA-Z0-9.\u{fc}\u{dc}\u{df}\u{4f8b}\u{301}_-]{0,12}",
            "[a-z\u{6d4b}]{0,4}",
        )
            .prop_map(|(l, d, t)| format!("{l}@{d}.{t}"))
    }

    // Case count: proptest's default (256) unless PROPTEST_CASES says otherwise.
    proptest! {
        #[test]
        fn parse_never_panics(s in any::<String>()) {
            let _ = Email::parse(&s).map(|e| (e.normalized(), e.delivery_form()));
            let _ = Email::parse_for_lookup(&s).map(|e| (e.normalized(), e.delivery_form()));
        }

        #[test]
        fn parse_is_idempotent_and_keys_are_stable(s in prop_oneof![any::<String>(), address_like()]) {
            if let Ok(e) = Email::parse(&s) {
                let again = Email::parse(e.as_str()).expect("an accepted address parses again");
                prop_assert_eq!(&again, &e);
                prop_assert_eq!(again.normalized(), e.normalized());
                prop_assert!(e.ascii_domain().is_ascii());
                // The key is a fixed point of case folding: re-keying twice
                // changes nothing.
                let key = e.normalized();
                if let Ok(k) = Email::parse(&key) {
                    prop_assert_eq!(k.normalized(), key);
                }
                // D8 (revised) migration: for ASCII the key is the old
                // lower-case key, so only non-ASCII rows need re-keying.
                if e.as_str().is_ascii() {
                    prop_assert_eq!(e.normalized(), e.as_str().to_lowercase());
                }
            }
        }
    }
}

/// A registered redirect URI (D20): `https`, or loopback `http` on
/// `127.0.0.1` / `[::1]` (RFC 8252 §7.3); no fragment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedirectUri(String);
string_value!(RedirectUri);

impl RedirectUri {
    /// The rule [`RedirectUri::parse`] applies, in words for people filling
    /// in a form before they submit it (issue 32).
    pub const RULE: &'static str = "Each must be an https:// address, or http://127.0.0.1 or http://[::1] (any port) for an app on the person's own machine, without a #fragment. Sign-ins may return only to an address listed here, exactly.";

    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw.len() > 2000 || raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("must be an absolute URI without spaces".into());
        }
        if raw.contains('#') {
            return Err("must not contain a fragment".into());
        }
        let host_ok = |rest: &str| {
            let authority = rest.split(['/', '?']).next().unwrap_or("");
            !authority.is_empty() && !authority.contains('@')
        };
        if let Some(rest) = raw.strip_prefix("https://") {
            if host_ok(rest) {
                return Ok(Self(raw.to_owned()));
            }
        } else if let Some(rest) = raw.strip_prefix("http://") {
            if Self::loopback_parts(rest).is_some() {
                return Ok(Self(raw.to_owned()));
            }
            return Err(
                "http is allowed only for loopback addresses (http://127.0.0.1 or http://[::1])"
                    .into(),
            );
        }
        Err("must be an https URI, or http on 127.0.0.1 or [::1]".into())
    }

    /// For `http://127.0.0.1[:port]/rest` or `http://[::1][:port]/rest`: (host, rest).
    fn loopback_parts(after_scheme: &str) -> Option<(&'static str, &str)> {
        for host in ["127.0.0.1", "[::1]"] {
            if let Some(rest) = after_scheme.strip_prefix(host) {
                let rest = match rest.strip_prefix(':') {
                    Some(p) => {
                        let digits = p.bytes().take_while(u8::is_ascii_digit).count();
                        if digits == 0 || digits > 5 {
                            return None;
                        }
                        &p[digits..]
                    }
                    None => rest,
                };
                if rest.is_empty() || rest.starts_with('/') || rest.starts_with('?') {
                    return Some((host, rest));
                }
            }
        }
        None
    }

    /// Whether `uri` is `http://` on a loopback address (RFC 8252 §7.3).
    pub fn is_loopback(uri: &str) -> bool {
        uri.strip_prefix("http://")
            .and_then(Self::loopback_parts)
            .is_some()
    }

    /// Whether `presented` matches this registered URI: exactly, or for a
    /// loopback URI, with any port (RFC 8252 §7.3).
    pub fn matches(&self, presented: &str) -> bool {
        if self.0 == presented {
            return true;
        }
        match (
            self.0
                .strip_prefix("http://")
                .and_then(Self::loopback_parts),
            presented
                .strip_prefix("http://")
                .and_then(Self::loopback_parts),
        ) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        }
    }
}

#[cfg(test)]
mod redirect_tests {
    use super::RedirectUri;

    #[test]
    fn https_or_loopback_http_only() {
        assert!(RedirectUri::parse("https://app.example.com/cb").is_ok());
        assert!(RedirectUri::parse("http://127.0.0.1:8000/cb").is_ok());
        assert!(RedirectUri::parse("http://[::1]/cb").is_ok());
        assert!(RedirectUri::parse("http://app.example.com/cb").is_err());
        assert!(RedirectUri::parse("http://127.0.0.1.evil.com/cb").is_err());
        assert!(RedirectUri::parse("https://app.example.com/cb#frag").is_err());
        assert!(RedirectUri::parse("javascript:alert(1)").is_err());
    }

    #[test]
    fn loopback_port_may_differ_but_nothing_else() {
        let r = RedirectUri::parse("http://127.0.0.1:8000/cb").unwrap();
        assert!(r.matches("http://127.0.0.1:51234/cb"));
        assert!(r.matches("http://127.0.0.1/cb"));
        assert!(!r.matches("http://127.0.0.1:51234/other"));
        assert!(!r.matches("http://[::1]:8000/cb"));
        let h = RedirectUri::parse("https://app.example.com/cb").unwrap();
        assert!(h.matches("https://app.example.com/cb"));
        assert!(!h.matches("https://app.example.com/cb/"));
    }
}
