//! A counter shared by every process that opens the same database, bumped
//! after each commit that changed a client application, and read with one
//! system call (no query).
//!
//! It lets the token endpoint keep client records in memory without ever
//! serving a stale one (D40: "a change made with the CLI while servers run
//! takes effect on their next request"): a cached record is used only while
//! the counter still has the value it had when the record was read.
//!
//! The counter is the length of `<database>-gen`: a bump appends one byte
//! (`O_APPEND`, so concurrent bumps from several processes each count), a
//! read is one `fstat` of the open file. The kernel keeps the length
//! coherent across processes at once, and no `unsafe` is needed (a shared
//! memory mapping would save the system call but not be expressible in safe
//! Rust). The bump happens after the commit, so a process that sees the old
//! value may still read the old row only while the writing command has not
//! yet returned. The file grows by one byte per client change.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) struct Generation {
    file: File,
    /// Handed out when the file cannot be read: each value is new, so every
    /// cached record misses and is read again (always correct).
    fallback: AtomicU64,
}

impl Generation {
    /// Opens `<db>-gen`, creating it if needed. `None` when it cannot be
    /// opened; callers then read every record from the database, which is
    /// always correct.
    pub(crate) fn open(db: &Path) -> Option<Self> {
        let mut name = db.as_os_str().to_owned();
        name.push("-gen");
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&name)
            .map_err(|e| tracing::warn!(file = ?name, error = %e, "no client generation file"))
            .ok()?;
        Some(Self {
            file,
            fallback: AtomicU64::new(u64::MAX / 2),
        })
    }

    pub(crate) fn load(&self) -> u64 {
        match self.file.metadata() {
            Ok(m) => m.len(),
            Err(e) => {
                tracing::warn!(error = %e, "reading the client generation failed");
                self.fallback.fetch_add(1, Ordering::Relaxed)
            }
        }
    }

    pub(crate) fn bump(&self) {
        if let Err(e) = (&self.file).write_all(&[0]) {
            // Without the bump other processes could serve a stale client:
            // say so loudly (the writing process itself re-reads anyway).
            tracing::error!(error = %e, "bumping the client generation failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_handles_of_one_file_see_each_others_bumps() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("g.db");
        let a = Generation::open(&db).unwrap();
        let b = Generation::open(&db).unwrap();
        let start = a.load();
        b.bump();
        assert_eq!(a.load(), start + 1);
        a.bump();
        assert_eq!(b.load(), start + 2);
        // Reopening keeps the value (the file is not reset).
        drop(a);
        let c = Generation::open(&db).unwrap();
        assert_eq!(c.load(), start + 2);
    }
}
