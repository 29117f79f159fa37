//! Validated value types (D8). Each `parse` returns the issue text on failure,
//! which the server reports as a `details` item of a `VALIDATION_ERROR`.

use std::fmt;

use serde::Serialize;

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

/// An e-mail address: trimmed, at most 254 characters, one `@`, a dot in the
/// domain (D8). Compared case-insensitively through [`Email::normalized`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Email(String);
string_value!(Email);

impl Email {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let s = raw.trim();
        const MSG: &str = "must be an e-mail address such as name@example.com";
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
        Ok(Self(s.to_owned()))
    }

    /// The form used for uniqueness and look-ups: lower case.
    pub fn normalized(&self) -> String {
        self.0.to_lowercase()
    }
}

/// A stock-keeping unit: 1–64 of `A-Z a-z 0-9 - _ .` (D8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sku(String);
string_value!(Sku);

impl Sku {
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

pub fn parse_amount(v: i64) -> Result<i64, String> {
    if (0..=MAX_AMOUNT).contains(&v) {
        Ok(v)
    } else {
        Err("must be an integer from 0 to 9007199254740991".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

/// A registered redirect URI (D20): `https`, or loopback `http` on
/// `127.0.0.1` / `[::1]` (RFC 8252 §7.3); no fragment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedirectUri(String);
string_value!(RedirectUri);

impl RedirectUri {
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
