//! The contract in the repository (issue 25): every decision the project
//! cites (`D24`, `D46 (revised)` …) anywhere in its sources, tests, scripts
//! and documents has exactly one entry in `docs/contract/` (an anchor
//! `<a id="d24"></a>`), so a citation can be followed from a clone; and
//! every decision there is (1 to 58; numbers 37 to 39 were never issued).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Text files of the repository worth reading for citations.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    const SKIP: [&str; 5] = ["target", ".git", "node_modules", "fixtures", "screenshots"];
    const TEXT: [&str; 11] = [
        "rs", "md", "sh", "html", "toml", "sql", "js", "py", "css", "json", "lua",
    ];
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !SKIP.contains(&name.as_str()) {
                files(&path, out);
            }
        } else if name != "package-lock.json"
            && path
                .extension()
                .is_some_and(|e| TEXT.contains(&e.to_string_lossy().as_ref()))
        {
            out.push(path);
        }
    }
}

/// The decision numbers `text` cites: a `D` and one or two digits, standing
/// alone (not inside a word or a longer number, as in `#D3D3D3`).
fn citations(text: &str) -> BTreeSet<u32> {
    let b = text.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut found = BTreeSet::new();
    for i in 0..b.len() {
        if b[i] != b'D' || (i > 0 && word(b[i - 1])) {
            continue;
        }
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        let end = i + 1 + digits;
        if (1..=2).contains(&digits) && b.get(end).is_none_or(|c| !word(*c)) {
            found.insert(text[i + 1..end].parse().unwrap());
        }
    }
    found
}

/// The anchors of `docs/contract/`: decision → the files that hold it.
fn entries() -> BTreeMap<u32, Vec<String>> {
    let dir = root().join("docs/contract");
    let mut found: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(entry.path()).unwrap();
        for part in text.split("<a id=\"d").skip(1) {
            let n: String = part.chars().take_while(char::is_ascii_digit).collect();
            if part[n.len()..].starts_with("\"></a>") {
                found
                    .entry(n.parse().unwrap())
                    .or_default()
                    .push(name.clone());
            }
        }
    }
    found
}

#[test]
fn every_cited_decision_has_one_entry_in_docs_contract() {
    let entries = entries();
    let twice: Vec<_> = entries.iter().filter(|(_, f)| f.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "decisions with more than one entry: {twice:?}"
    );
    let issued: BTreeSet<u32> = (1..=58).filter(|n| !(37..=39).contains(n)).collect();
    let missing: Vec<_> = issued.iter().filter(|n| !entries.contains_key(n)).collect();
    assert!(missing.is_empty(), "decisions with no entry: {missing:?}");

    let mut all = Vec::new();
    files(&root(), &mut all);
    assert!(
        all.len() > 100,
        "the walk found the repository ({} files)",
        all.len()
    );
    let mut unknown: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for path in all {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        for n in citations(&text) {
            if !entries.contains_key(&n) {
                let shown = path.strip_prefix(root()).unwrap_or(&path);
                unknown
                    .entry(n)
                    .or_default()
                    .push(shown.display().to_string());
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "citations with no entry in docs/contract/: {unknown:?}"
    );
}

#[test]
fn citations_are_found_where_they_stand_alone() {
    let got = citations("D24, (D46 revised) D6's D1. #D3D3D3 D123 AD5 D_7 D9x");
    assert_eq!(got, BTreeSet::from([1, 6, 24, 46]));
}
