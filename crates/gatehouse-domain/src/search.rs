//! What a list search matches (D14 for users, D17 for products), as the text
//! a row is searched in and the needles a `q` becomes. The in-memory search
//! index (`gatehouse-search`, issue 16) finds needles in these texts and
//! nothing else, so this is the one place that says what matches.
//!
//! - Users (D14): `q` is a literal, case-insensitive substring of `name` or
//!   `email`. Both sides are folded character by character
//!   ([`fold_chars`]), which keeps every substring of the original a
//!   substring of the folded text (whole-string lower-casing would not: a
//!   final sigma folds differently at the end of `q` than inside a name).
//!   The row text is the folded name and the folded e-mail, each followed by
//!   a NUL. A `q` holding a control character matches nothing (D6
//!   continued), so no needle holds a NUL and none can span two fields or
//!   two rows.
//! - Products (D17): every word of `q` (a run of letters and digits,
//!   lower-cased: [`crate::values::words`]) is a prefix of some word of
//!   `name` or `sku`. The row text is a space before each word of name and
//!   sku, then a NUL; a query word `w` becomes the needle `" w"`.

use crate::values::{SearchText, words};
use crate::{Product, ProductStatus, Role, User, UserStatus};

/// Which list a search index holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SearchKind {
    Users,
    Products,
}

impl SearchKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SearchKind::Users => "users",
            SearchKind::Products => "products",
        }
    }
}

/// One row as a search index holds it: its place in the list order
/// (`created_at` descending, then `id` descending), the text it is searched
/// in (see the module), and the equality filters as small codes (users:
/// role and status; products: status and 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchRow {
    pub created_at: i64,
    pub id: String,
    pub text: Vec<u8>,
    pub attrs: [u8; 2],
}

/// A `q` as needles: a row matches when its text contains every needle.
/// An empty list matches every row (a product `q` without a word, D17);
/// `None` matches no row (D6 continued).
pub type Needles = Option<Vec<Vec<u8>>>;

/// Lower-cases each character on its own (see the module).
pub fn fold_chars(s: &str) -> String {
    s.chars().flat_map(char::to_lowercase).collect()
}

/// The text a user is searched in (D14).
pub fn user_text(name: &str, email: &str) -> Vec<u8> {
    let mut text = fold_chars(name).into_bytes();
    text.push(0);
    text.extend_from_slice(fold_chars(email).as_bytes());
    text.push(0);
    text
}

/// The text a product is searched in (D17).
pub fn product_text(name: &str, sku: &str) -> Vec<u8> {
    let mut text = Vec::with_capacity(name.len() + sku.len() + 4);
    for word in words(name).iter().chain(words(sku).iter()) {
        text.push(b' ');
        text.extend_from_slice(word.as_bytes());
    }
    text.push(0);
    text
}

/// The needles of a user search (D14).
pub fn user_needles(q: &SearchText) -> Needles {
    if q.matches_nothing() {
        return None;
    }
    Some(vec![fold_chars(q.as_str()).into_bytes()])
}

/// The needles of a product search (D17).
pub fn product_needles(q: &SearchText) -> Needles {
    if q.matches_nothing() {
        return None;
    }
    Some(
        q.words()
            .into_iter()
            .map(|w| {
                let mut needle = Vec::with_capacity(w.len() + 1);
                needle.push(b' ');
                needle.extend_from_slice(w.as_bytes());
                needle
            })
            .collect(),
    )
}

/// The codes of a user's role and status in a [`SearchRow`].
pub fn user_attrs(role: Role, status: UserStatus) -> [u8; 2] {
    [role as u8, status as u8]
}

/// The code of a product's status in a [`SearchRow`].
pub fn product_attrs(status: ProductStatus) -> [u8; 2] {
    [status as u8, 0]
}

/// The codes a user list's filters keep ([`user_attrs`]).
pub fn user_filter_codes(role: Option<Role>, status: Option<UserStatus>) -> [Option<u8>; 2] {
    [role.map(|r| r as u8), status.map(|s| s as u8)]
}

/// The codes a product list's filter keeps ([`product_attrs`]).
pub fn product_filter_codes(status: Option<ProductStatus>) -> [Option<u8>; 2] {
    [status.map(|s| s as u8), None]
}

/// A user as a [`SearchRow`].
pub fn user_row(u: &User) -> SearchRow {
    SearchRow {
        created_at: u.created_at.millis(),
        id: u.id.as_str().to_owned(),
        text: user_text(u.name.as_str(), u.email.as_str()),
        attrs: user_attrs(u.role, u.status),
    }
}

/// A product as a [`SearchRow`].
pub fn product_row(p: &Product) -> SearchRow {
    SearchRow {
        created_at: p.created_at.millis(),
        id: p.id.as_str().to_owned(),
        text: product_text(p.name.as_str(), p.sku.as_str()),
        attrs: product_attrs(p.status),
    }
}

/// Whether `text` (a row's text) contains every needle: the definition the
/// index's faster scan must agree with (tested there).
pub fn matches(text: &[u8], needles: &Needles) -> bool {
    match needles {
        None => false,
        Some(needles) => needles
            .iter()
            .all(|n| n.is_empty() || text.windows(n.len()).any(|w| w == n.as_slice())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> SearchText {
        SearchText::parse(s).unwrap().unwrap()
    }

    #[test]
    fn user_search_is_a_case_insensitive_substring_of_name_or_email() {
        let text = user_text("Ada Lovelace", "ADA.L@Example.COM");
        for hit in ["ada", "LOVE", "a l", ".l@ex", "example.com", "e"] {
            assert!(matches(&text, &user_needles(&q(hit))), "{hit}");
        }
        // Not across the two fields, and not a control character (D6).
        for miss in ["lovelaceada", "ce\u{0}ad", "zz", "ada\n"] {
            assert!(!matches(&text, &user_needles(&q(miss))), "{miss:?}");
        }
    }

    #[test]
    fn folding_each_character_keeps_substrings() {
        // A final sigma at the end of `q` still finds the letter inside a word.
        let text = user_text("ΟΔΟΣΟΣ", "x@example.com");
        assert!(matches(&text, &user_needles(&q("ΟΔΟΣ"))));
        assert!(!matches(&text, &user_needles(&q("Élo"))));
        assert!(matches(
            &user_text("Élodie", "e@x.io"),
            &user_needles(&q("éLO"))
        ));
    }

    #[test]
    fn product_search_takes_every_word_as_a_prefix() {
        let text = product_text("Blue Cotton Shirt", "SH-0042");
        for hit in ["blu", "cot shi", "SHIRT blue", "sh 004", "0042", "  ", "-"] {
            assert!(matches(&text, &product_needles(&q(hit))), "{hit}");
        }
        for miss in ["otton", "blue red", "shirts", "42"] {
            assert!(!matches(&text, &product_needles(&q(miss))), "{miss}");
        }
        assert!(!matches(&text, &product_needles(&q("blue\t"))));
    }
}
