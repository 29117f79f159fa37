//! A counter shared by every process that opens the same database, bumped
//! after each commit that changed a client application, and read with one
//! memory load (no query, no system call).
//!
//! It lets the token endpoint keep client records in memory without ever
//! serving a stale one (D40: "a change made with the CLI while servers run
//! takes effect on their next request"): a cached record is used only while
//! the counter still has the value it had when the record was read.
//!
//! The counter lives in `<database>-gen`, a small file mapped shared into
//! every process, exactly as SQLite keeps its WAL index in `<database>-shm`
//! (and with the same requirement: every process on one host, which WAL
//! already imposes). The bump happens after the commit, so a process that
//! sees the old value may still read the old row only while the writing
//! command has not yet returned.

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::MmapMut;

/// Size of the file: one aligned `u64`.
const LEN: u64 = 8;

pub(crate) struct Generation {
    map: MmapMut,
}

impl Generation {
    /// Maps `<db>-gen`, creating it (zeroed) if needed. `None` when the file
    /// cannot be created or mapped; callers then read every record from the
    /// database, which is always correct.
    pub(crate) fn open(db: &Path) -> Option<Self> {
        let mut name = db.as_os_str().to_owned();
        name.push("-gen");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&name)
            .map_err(|e| tracing::warn!(file = ?name, error = %e, "no client generation file"))
            .ok()?;
        if file.metadata().ok()?.len() < LEN {
            file.set_len(LEN).ok()?;
        }
        // SAFETY: the mapping is shared with other Gatehouse processes, which
        // only ever touch these 8 bytes through the atomic below; the file is
        // never truncated below 8 bytes (it is only ever grown to 8).
        let map = unsafe { memmap2::MmapOptions::new().len(LEN as usize).map_mut(&file) }
            .map_err(|e| tracing::warn!(file = ?name, error = %e, "cannot map the client generation file"))
            .ok()?;
        Some(Self { map })
    }

    fn counter(&self) -> &AtomicU64 {
        let ptr = self.map.as_ptr() as *const AtomicU64;
        // SAFETY: the mapping is page-aligned, at least 8 bytes long and lives
        // as long as `self`; `AtomicU64` has the layout of a `u64`, and every
        // access from any process is atomic.
        unsafe { &*ptr }
    }

    pub(crate) fn load(&self) -> u64 {
        self.counter().load(Ordering::Acquire)
    }

    pub(crate) fn bump(&self) {
        self.counter().fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_mappings_of_one_file_see_each_others_bumps() {
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
