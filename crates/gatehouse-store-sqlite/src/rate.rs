//! SQLite: no shared rate windows. A SQLite database serves one node, so the
//! in-memory limiter counts (D28) and the trait's defaults answer: nothing
//! shared, `count_request` → `None`.

use super::*;

impl RateStore for SqliteStore {}
