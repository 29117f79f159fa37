//! SQLite: rate windows shared by the nodes of one store (D28, D44).

use super::*;

impl RateStore for SqliteStore {}
