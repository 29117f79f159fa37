//! Property tests of the domain's parsers of untrusted input (issue 11):
//! arbitrary input never panics, and what parses round-trips. The number
//! of cases comes from `PROPTEST_CASES` (`.ci/run` bounds it).

use gatehouse_domain::{Name, OrgId, Page, ProductId, RedirectUri, SearchText, Sku, UserId};
use proptest::prelude::*;

proptest! {
    #[test]
    fn path_ids_never_panic_and_round_trip(raw in any::<String>()) {
        if let Some(id) = UserId::parse(&raw) {
            prop_assert_eq!(UserId::parse(id.as_str()), Some(id.clone()));
            prop_assert!(id.as_str().starts_with("usr_"));
        }
        if let Some(id) = ProductId::parse(&raw) {
            prop_assert_eq!(ProductId::parse(id.as_str()), Some(id.clone()));
        }
        let _ = OrgId::parse(&raw);
    }

    #[test]
    fn well_formed_ids_parse(suffix in "[A-Za-z0-9_-]{16,40}") {
        // Whatever the id alphabet, a prefix of another resource never parses.
        let user = format!("usr_{suffix}");
        if let Some(id) = UserId::parse(&user) {
            prop_assert_eq!(id.as_str(), user.as_str());
        }
        prop_assert_eq!(UserId::parse(&format!("prod_{suffix}")), None);
        prop_assert_eq!(ProductId::parse(&format!("usr_{suffix}")), None);
    }

    #[test]
    fn generated_ids_round_trip(_n in 0u8..4) {
        let id = UserId::generate();
        prop_assert_eq!(UserId::parse(id.as_str()), Some(id));
        let id = ProductId::generate();
        prop_assert_eq!(ProductId::parse(id.as_str()), Some(id));
    }

    #[test]
    fn redirect_uris_never_panic_and_round_trip(raw in any::<String>()) {
        if let Ok(uri) = RedirectUri::parse(&raw) {
            let again = RedirectUri::parse(uri.as_str());
            prop_assert_eq!(again, Ok(uri.clone()));
            prop_assert!(uri.matches(uri.as_str()));
            prop_assert!(uri.as_str().starts_with("https://") || uri.as_str().starts_with("http://"));
        }
    }

    #[test]
    fn loopback_redirect_uris_match_any_port(
        path in "(/[a-z0-9]{0,8}){0,3}",
        a in 1u16..,
        b in 1u16..,
    ) {
        let registered = RedirectUri::parse(&format!("http://127.0.0.1:{a}{path}")).unwrap();
        let same_host = format!("http://127.0.0.1:{b}{path}");
        let other_host = format!("http://127.0.0.2:{b}{path}");
        prop_assert!(registered.matches(&same_host));
        prop_assert!(!registered.matches(&other_host));
    }

    #[test]
    fn names_skus_and_search_text_never_panic_and_round_trip(raw in any::<String>()) {
        if let Ok(n) = Name::parse(&raw) {
            prop_assert_eq!(Name::parse(n.as_str()), Ok(n.clone()));
            prop_assert!(!n.as_str().chars().any(char::is_control));
        }
        if let Ok(s) = Sku::parse(&raw) {
            prop_assert_eq!(Sku::parse(s.as_str()), Ok(s.clone()));
        }
        if let Ok(Some(q)) = SearchText::parse(&raw) {
            prop_assert_eq!(SearchText::parse(q.as_str()), Ok(Some(q.clone())));
            let _ = q.words();
        }
    }

    #[test]
    fn pages_never_panic_and_stay_in_bounds(limit in any::<Option<String>>(), offset in any::<Option<String>>()) {
        if let Ok(p) = Page::parse(limit.as_deref(), offset.as_deref()) {
            prop_assert!((1..=100).contains(&p.limit));
        }
    }

    #[test]
    fn numeric_pages_parse(limit in 1u64..10_000, offset in 0u64..1_000_000_000) {
        let p = Page::parse(Some(&limit.to_string()), Some(&offset.to_string())).unwrap();
        prop_assert_eq!(u64::from(p.limit), limit.min(100));
        prop_assert_eq!(p.offset, offset);
    }
}
