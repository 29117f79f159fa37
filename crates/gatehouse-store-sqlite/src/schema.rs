//! Embedded migrations, applied in order inside one `BEGIN IMMEDIATE`
//! transaction each, so two processes starting at once apply each only once.

pub(crate) const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../migrations/0001_init.sql")),
    (2, include_str!("../migrations/0002_api_keys.sql")),
    (3, include_str!("../migrations/0003_auth.sql")),
    (4, include_str!("../migrations/0004_access_jti.sql")),
    (5, include_str!("../migrations/0005_jobs.sql")),
    (7, include_str!("../migrations/0007_reset_requests.sql")),
];
