//! The in-memory search index of one organization's users or products
//! (issue 16): every list with `q`, and every deep page, is answered here
//! with an exact `total` (D14, D17), and only the page's rows are read from
//! storage afterwards.
//!
//! # Why a scan in memory, and not an index structure
//!
//! What matches is defined in `gatehouse_domain::search`: a literal
//! substring for users (any length, two letters included) and word prefixes
//! for products. Each row's text is stored folded, rows in list order
//! (`created_at` descending, then `id` descending), in chunks of a few
//! thousand rows whose texts sit in one buffer. A search runs SIMD substring
//! search (`memchr::memmem`) over the buffers: at one million users that is
//! about 45 MB, read at memory speed, whatever the term. A trigram or
//! word index answers a rare term faster but not a frequent one, and cannot
//! give an exact count of a two-letter term without reading as much; the
//! scan's cost is the same for every `q`, which is what the p99 target asks.
//! Deep pages without `q` skip whole chunks through per-chunk counts of the
//! filter codes.
//!
//! Chunks keep a write cheap: a change rebuilds nothing but its chunk.
//! Keeping the index in step with storage (on every node) is the
//! application layer's job (`gatehouse-app::search`); this crate is the
//! data structure alone, with no I/O.

use std::cmp::Ordering;

use gatehouse_domain::search::{Needles, SearchRow};
use memchr::memmem::Finder;

/// Rows per chunk when an index is built; a chunk splits above
/// [`CHUNK_MAX`] rows.
const CHUNK_TARGET: usize = 2048;
const CHUNK_MAX: usize = 4096;
/// Filter codes are below this (the domain's enums have three values).
const CODES: usize = 8;

/// The equality filters of a list: `Some(code)` keeps the rows whose
/// attribute has that code (`gatehouse_domain::search::user_attrs`,
/// `product_attrs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Filter(pub [Option<u8>; 2]);

impl Filter {
    fn accepts(self, attrs: [u8; 2]) -> bool {
        self.0[0].is_none_or(|c| c == attrs[0]) && self.0[1].is_none_or(|c| c == attrs[1])
    }
}

/// A page of matches: their ids in list order and the count of all matches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hits {
    pub ids: Vec<String>,
    pub total: u64,
}

/// A row's place in the list: `(created_at, id)`; larger comes first.
pub type Key<'a> = (i64, &'a str);

fn cmp_key(a: Key<'_>, b: Key<'_>) -> Ordering {
    a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1))
}

fn code(c: u8) -> usize {
    (c as usize).min(CODES - 1)
}

/// A run of consecutive rows of the list.
#[derive(Default)]
struct Chunk {
    keys: Vec<(i64, Box<str>)>,
    attrs: Vec<[u8; 2]>,
    /// The rows' texts, one after the other.
    text: Vec<u8>,
    /// The end of each row's text in `text`.
    ends: Vec<u32>,
    /// Rows per pair of filter codes.
    counts: [[u32; CODES]; CODES],
}

impl Chunk {
    fn key(&self, i: usize) -> Key<'_> {
        (self.keys[i].0, &self.keys[i].1)
    }

    fn last_key(&self) -> Key<'_> {
        self.key(self.keys.len() - 1)
    }

    fn start(&self, i: usize) -> usize {
        if i == 0 { 0 } else { self.ends[i - 1] as usize }
    }

    fn push(&mut self, row: SearchRow) {
        self.text.extend_from_slice(&row.text);
        self.ends.push(self.text.len() as u32);
        self.counts[code(row.attrs[0])][code(row.attrs[1])] += 1;
        self.attrs.push(row.attrs);
        self.keys.push((row.created_at, row.id.into_boxed_str()));
    }

    /// Where `key` is, or would go: the first row not before it.
    fn position(&self, key: Key<'_>) -> usize {
        self.keys
            .partition_point(|(at, id)| cmp_key((*at, id), key) == Ordering::Greater)
    }

    fn remove(&mut self, i: usize) {
        let (start, end) = (self.start(i), self.ends[i] as usize);
        let len = (end - start) as u32;
        self.text.drain(start..end);
        self.ends.remove(i);
        for e in &mut self.ends[i..] {
            *e -= len;
        }
        let attrs = self.attrs.remove(i);
        self.counts[code(attrs[0])][code(attrs[1])] -= 1;
        self.keys.remove(i);
    }

    fn insert(&mut self, i: usize, row: SearchRow) {
        let start = self.start(i);
        let len = row.text.len() as u32;
        self.text.splice(start..start, row.text);
        for e in &mut self.ends[i..] {
            *e += len;
        }
        self.ends.insert(i, start as u32 + len);
        self.counts[code(row.attrs[0])][code(row.attrs[1])] += 1;
        self.attrs.insert(i, row.attrs);
        self.keys
            .insert(i, (row.created_at, row.id.into_boxed_str()));
    }

    /// Splits off the second half.
    fn split(&mut self) -> Chunk {
        let mid = self.keys.len() / 2;
        let mut tail = Chunk::default();
        let cut = self.start(mid);
        for i in mid..self.keys.len() {
            let (start, end) = (self.start(i), self.ends[i] as usize);
            tail.push(SearchRow {
                created_at: self.keys[i].0,
                id: self.keys[i].1.to_string(),
                text: self.text[start..end].to_vec(),
                attrs: self.attrs[i],
            });
        }
        self.text.truncate(cut);
        self.ends.truncate(mid);
        for a in self.attrs.drain(mid..) {
            self.counts[code(a[0])][code(a[1])] -= 1;
        }
        self.keys.truncate(mid);
        tail
    }

    fn count(&self, f: Filter) -> u64 {
        let mut n = 0u64;
        for (a, row) in self.counts.iter().enumerate() {
            if f.0[0].is_some_and(|c| code(c) != a) {
                continue;
            }
            for (b, count) in row.iter().enumerate() {
                if f.0[1].is_none_or(|c| code(c) == b) {
                    n += u64::from(*count);
                }
            }
        }
        n
    }

    /// Calls `hit` with each row from `from` on that passes `f` and holds
    /// every needle (`finders` non-empty, the first searched for); stops
    /// when `hit` says so.
    fn scan(
        &self,
        from: usize,
        finders: &[Finder<'_>],
        f: Filter,
        hit: &mut impl FnMut(usize) -> bool,
    ) -> bool {
        if finders.is_empty() {
            for i in from..self.keys.len() {
                if f.accepts(self.attrs[i]) && !hit(i) {
                    return false;
                }
            }
            return true;
        }
        let (first, rest) = (&finders[0], &finders[1..]);
        let mut pos = self.start(from);
        let mut row = from;
        while pos < self.text.len() {
            let Some(found) = first.find(&self.text[pos..]) else {
                break;
            };
            let at = pos + found;
            // The match is usually in one of the next few rows (a frequent
            // term): step to it; a rare one may be far on: search.
            let mut steps = 0;
            while self.ends[row] as usize <= at && steps < 8 {
                row += 1;
                steps += 1;
            }
            if self.ends[row] as usize <= at {
                row += self.ends[row..].partition_point(|&e| e as usize <= at);
            }
            let (start, end) = (self.start(row), self.ends[row] as usize);
            if f.accepts(self.attrs[row])
                && rest
                    .iter()
                    .all(|n| n.find(&self.text[start..end]).is_some())
                && !hit(row)
            {
                return false;
            }
            pos = end;
            row += 1;
        }
        true
    }
}

/// One organization's users or products, in list order.
#[derive(Default)]
pub struct Index {
    chunks: Vec<Chunk>,
    len: usize,
}

impl Index {
    /// An index of `rows`, in any order.
    pub fn from_rows(mut rows: Vec<SearchRow>) -> Self {
        let before =
            |a: &SearchRow, b: &SearchRow| cmp_key((b.created_at, &b.id), (a.created_at, &a.id));
        if !rows.is_sorted_by(|a, b| before(a, b) != Ordering::Greater) {
            rows.sort_unstable_by(before);
        }
        rows.dedup_by(|a, b| a.created_at == b.created_at && a.id == b.id);
        let len = rows.len();
        let mut chunks = Vec::with_capacity(len / CHUNK_TARGET + 1);
        let mut chunk = Chunk::default();
        for row in rows {
            chunk.push(row);
            if chunk.keys.len() == CHUNK_TARGET {
                chunks.push(std::mem::take(&mut chunk));
            }
        }
        if !chunk.keys.is_empty() {
            chunks.push(chunk);
        }
        Self { chunks, len }
    }

    /// How many rows the index holds.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes held, roughly (for the operator's metrics).
    pub fn bytes(&self) -> usize {
        self.chunks
            .iter()
            .map(|c| {
                c.text.capacity()
                    + c.ends.capacity() * 4
                    + c.attrs.capacity() * 2
                    + c.keys.iter().map(|k| k.1.len() + 24).sum::<usize>()
            })
            .sum()
    }

    /// The chunk `key` belongs in.
    fn chunk_of(&self, key: Key<'_>) -> usize {
        let i = self
            .chunks
            .partition_point(|c| cmp_key(c.last_key(), key) == Ordering::Greater);
        i.min(self.chunks.len().saturating_sub(1))
    }

    /// Removes the row at `key`, if held.
    pub fn remove(&mut self, key: Key<'_>) -> bool {
        if self.chunks.is_empty() {
            return false;
        }
        let c = self.chunk_of(key);
        let chunk = &mut self.chunks[c];
        let i = chunk.position(key);
        if i < chunk.keys.len() && chunk.key(i) == key {
            chunk.remove(i);
            if chunk.keys.is_empty() {
                self.chunks.remove(c);
            }
            self.len -= 1;
            true
        } else {
            false
        }
    }

    /// Inserts `row`, replacing the row of the same key.
    pub fn upsert(&mut self, row: SearchRow) {
        self.remove((row.created_at, &row.id));
        if self.chunks.is_empty() {
            let mut chunk = Chunk::default();
            chunk.push(row);
            self.chunks.push(chunk);
            self.len += 1;
            return;
        }
        let c = self.chunk_of((row.created_at, &row.id));
        let chunk = &mut self.chunks[c];
        let i = chunk.position((row.created_at, &row.id));
        chunk.insert(i, row);
        if chunk.keys.len() > CHUNK_MAX {
            let tail = chunk.split();
            self.chunks.insert(c + 1, tail);
        }
        self.len += 1;
    }

    /// Applies changes read from storage: every `changed` key is dropped,
    /// then every row of `current` (the changed rows that still exist) is
    /// put back as it is now.
    pub fn apply(&mut self, changed: &[(i64, String)], current: Vec<SearchRow>) {
        for (at, id) in changed {
            self.remove((*at, id));
        }
        for row in current {
            self.upsert(row);
        }
    }

    /// One page (`offset`, `limit`) of the rows passing `filter` and holding
    /// every needle, and how many there are in all.
    pub fn page(&self, needles: &Needles, filter: Filter, offset: u64, limit: u32) -> Hits {
        let Some(needles) = needles else {
            return Hits::default();
        };
        let mut needles: Vec<&[u8]> = needles
            .iter()
            .map(Vec::as_slice)
            .filter(|n| !n.is_empty())
            .collect();
        // The longest needle first: the likeliest to be rare.
        needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
        let finders: Vec<Finder<'_>> = needles.iter().map(Finder::new).collect();
        let end = offset.saturating_add(u64::from(limit));
        let mut hits = Hits::default();
        for chunk in &self.chunks {
            if finders.is_empty()
                && (hits.total >= end || hits.total + chunk.count(filter) <= offset)
            {
                // Without `q` a chunk wholly before or after the page is counted, not read.
                hits.total += chunk.count(filter);
                continue;
            }
            chunk.scan(0, &finders, filter, &mut |i| {
                if hits.total >= offset && hits.total < end {
                    hits.ids.push(chunk.keys[i].1.to_string());
                }
                hits.total += 1;
                true
            });
        }
        hits
    }

    /// Up to `limit` ids of the rows passing `filter` and holding every
    /// needle that come after `after` in the list (D32 cursor pages).
    pub fn after(
        &self,
        needles: &Needles,
        filter: Filter,
        after: Option<Key<'_>>,
        limit: u32,
    ) -> Vec<String> {
        let Some(needles) = needles else {
            return Vec::new();
        };
        let finders: Vec<Finder<'_>> = needles
            .iter()
            .filter(|n| !n.is_empty())
            .map(Finder::new)
            .collect();
        let mut ids = Vec::new();
        if limit == 0 || self.chunks.is_empty() {
            return ids;
        }
        let (first, mut from) = match after {
            None => (0, 0),
            Some(key) => {
                let c = self.chunk_of(key);
                let mut i = self.chunks[c].position(key);
                if i < self.chunks[c].keys.len() && self.chunks[c].key(i) == key {
                    i += 1;
                }
                (c, i)
            }
        };
        for chunk in &self.chunks[first..] {
            let go_on = chunk.scan(from.min(chunk.keys.len()), &finders, filter, &mut |i| {
                ids.push(chunk.keys[i].1.to_string());
                ids.len() < limit as usize
            });
            if !go_on {
                break;
            }
            from = 0;
        }
        ids
    }
}

#[cfg(test)]
mod tests {
    use gatehouse_domain::SearchText;
    use gatehouse_domain::search::{
        matches, product_needles, product_text, user_needles, user_text,
    };
    use proptest::prelude::*;

    use super::*;

    fn row(at: i64, id: &str, name: &str, email: &str, attrs: [u8; 2]) -> SearchRow {
        SearchRow {
            created_at: at,
            id: id.into(),
            text: user_text(name, email),
            attrs,
        }
    }

    /// The definition: sort by the list order, keep what matches.
    fn naive(rows: &[SearchRow], needles: &Needles, f: Filter) -> Vec<String> {
        let mut rows: Vec<_> = rows.to_vec();
        rows.sort_by(|a, b| cmp_key((b.created_at, &b.id), (a.created_at, &a.id)));
        rows.dedup_by(|a, b| a.created_at == b.created_at && a.id == b.id);
        let all_needles_empty = needles
            .as_ref()
            .is_some_and(|n| n.iter().all(Vec::is_empty));
        rows.into_iter()
            .filter(|r| f.accepts(r.attrs) && (all_needles_empty || matches(&r.text, needles)))
            .map(|r| r.id)
            .collect()
    }

    fn q(s: &str) -> SearchText {
        SearchText::parse(s).unwrap().unwrap()
    }

    #[test]
    fn pages_totals_and_filters_follow_the_list_order() {
        let rows: Vec<_> = (0..10_000)
            .map(|i| {
                let name = format!("Person {i} {}", ["Ada", "Grace", "Alan"][i % 3]);
                row(
                    i as i64 / 3,
                    &format!("usr_{i:05}"),
                    &name,
                    &format!("p{i}@ex{}.com", i % 7),
                    [(i % 3) as u8, (i % 5 % 3) as u8],
                )
            })
            .collect();
        let index = Index::from_rows(rows.clone());
        assert_eq!(index.len(), 10_000);
        for (text, f) in [
            ("ada", Filter::default()),
            ("AD", Filter([Some(0), None])),
            ("@ex3", Filter([None, Some(2)])),
            ("9 g", Filter::default()),
            ("zzz", Filter::default()),
        ] {
            let needles = user_needles(&q(text));
            let want = naive(&rows, &needles, f);
            for (offset, limit) in [
                (0, 20),
                (100, 7),
                (3333, 100),
                (want.len() as u64, 20),
                (99_999, 20),
            ] {
                let hits = index.page(&needles, f, offset, limit);
                assert_eq!(hits.total, want.len() as u64, "{text}");
                let page: Vec<_> = want
                    .iter()
                    .skip(offset as usize)
                    .take(limit as usize)
                    .cloned()
                    .collect();
                assert_eq!(hits.ids, page, "{text} {offset}");
            }
        }
        // Without `q`: counted chunks skipped, the same answer.
        for f in [
            Filter::default(),
            Filter([Some(1), Some(1)]),
            Filter([None, Some(0)]),
        ] {
            let want = naive(&rows, &Some(vec![]), f);
            for offset in [0u64, 2047, 2048, 5000, 9_990] {
                let hits = index.page(&Some(vec![]), f, offset, 20);
                assert_eq!(hits.total, want.len() as u64);
                let page: Vec<_> = want
                    .iter()
                    .skip(offset as usize)
                    .take(20)
                    .cloned()
                    .collect();
                assert_eq!(hits.ids, page, "{f:?} {offset}");
            }
        }
        assert_eq!(index.page(&None, Filter::default(), 0, 20), Hits::default());
    }

    #[test]
    fn product_words_all_match_as_prefixes() {
        let rows: Vec<_> = (0..500)
            .map(|i| SearchRow {
                created_at: i,
                id: format!("prd_{i:04}"),
                text: product_text(
                    &format!(
                        "{} {} Shirt",
                        ["Blue", "Red"][i as usize % 2],
                        ["Cotton", "Wool", "Silk"][i as usize % 3]
                    ),
                    &format!("SKU-{i:04}"),
                ),
                attrs: [(i % 3) as u8, 0],
            })
            .collect();
        let index = Index::from_rows(rows.clone());
        for text in ["blue cot", "shirt", "sku 004", "wool red", "otton", "  "] {
            let needles = product_needles(&q(text));
            let want = naive(&rows, &needles, Filter::default());
            let hits = index.page(&needles, Filter::default(), 0, 100);
            assert_eq!(hits.total, want.len() as u64, "{text}");
            assert_eq!(
                hits.ids,
                want.into_iter().take(100).collect::<Vec<_>>(),
                "{text}"
            );
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Upsert(i64, u16, u8, u8),
        Remove(i64, u16),
    }

    proptest! {
        /// Any sequence of inserts, updates and removals (chunks splitting
        /// and emptying on the way) leaves the index answering like the
        /// definition over the rows that are left.
        #[test]
        fn changes_keep_the_index_exact(
            start in proptest::collection::vec((0i64..50, 0u16..400, 0u8..3, 0u8..26), 0..300),
            ops in proptest::collection::vec(prop_oneof![
                (0i64..50, 0u16..400, 0u8..3, 0u8..26).prop_map(|(a, i, r, l)| Op::Upsert(a, i, r, l)),
                (0i64..50, 0u16..400).prop_map(|(a, i)| Op::Remove(a, i)),
            ], 0..300),
            text in "[a-z]{1,2}",
            role in proptest::option::of(0u8..3),
            offset in 0u64..50,
            after in proptest::option::of((0i64..50, 0u16..400)),
        ) {
            let make = |a: i64, i: u16, r: u8, l: u8| {
                let letter = (b'a' + l) as char;
                row(a, &format!("id{i:03}"), &format!("N{letter}{}", (b'a' + (l + 1) % 26) as char), &format!("{i}@x.io"), [r, 0])
            };
            let mut model: std::collections::BTreeMap<(i64, String), SearchRow> = Default::default();
            for &(a, i, r, l) in &start {
                model.entry((a, format!("id{i:03}"))).or_insert_with(|| make(a, i, r, l));
            }
            let mut index = Index::from_rows(model.values().cloned().collect());
            for op in &ops {
                match *op {
                    Op::Upsert(a, i, r, l) => {
                        let row = make(a, i, r, l);
                        model.insert((a, row.id.clone()), row.clone());
                        index.upsert(row);
                    }
                    Op::Remove(a, i) => {
                        let id = format!("id{i:03}");
                        prop_assert_eq!(index.remove((a, &id)), model.remove(&(a, id)).is_some());
                    }
                }
            }
            let rows: Vec<_> = model.values().cloned().collect();
            prop_assert_eq!(index.len(), rows.len());
            let needles = user_needles(&q(&text));
            let f = Filter([role, None]);
            let want = naive(&rows, &needles, f);
            let hits = index.page(&needles, f, offset, 10);
            prop_assert_eq!(hits.total, want.len() as u64);
            prop_assert_eq!(hits.ids, want.iter().skip(offset as usize).take(10).cloned().collect::<Vec<_>>());
            let key = after.map(|(a, i)| (a, format!("id{i:03}")));
            let got = index.after(&needles, f, key.as_ref().map(|(a, i)| (*a, i.as_str())), 5);
            let mut all: Vec<_> = rows.clone();
            all.sort_by(|a, b| cmp_key((b.created_at, &b.id), (a.created_at, &a.id)));
            let want_after: Vec<String> = all
                .into_iter()
                .filter(|r| key.as_ref().is_none_or(|(a, i)| cmp_key((r.created_at, &r.id), (*a, i)) == Ordering::Less))
                .filter(|r| f.accepts(r.attrs) && matches(&r.text, &needles))
                .map(|r| r.id)
                .take(5)
                .collect();
            prop_assert_eq!(got, want_after);
        }
    }

    #[test]
    fn chunks_split_and_empty() {
        let mut index = Index::default();
        for i in 0..(CHUNK_MAX as i64 * 3) {
            index.upsert(row(i % 1000, &format!("u{i:06}"), "Ada", "a@x.io", [0, 0]));
        }
        assert!(index.chunks.len() >= 3);
        assert!(index.chunks.iter().all(|c| c.keys.len() <= CHUNK_MAX));
        let needles = user_needles(&q("ada"));
        assert_eq!(
            index.page(&needles, Filter::default(), 0, 1).total,
            CHUNK_MAX as u64 * 3
        );
        for i in 0..(CHUNK_MAX as i64 * 3) {
            assert!(index.remove((i % 1000, &format!("u{i:06}"))));
        }
        assert!(index.is_empty());
        assert!(index.chunks.is_empty());
        assert_eq!(index.page(&needles, Filter::default(), 0, 1).total, 0);
    }
}
