//! The `gatehouse` binary as a library: command line and configuration
//! ([`config`]), TLS and the listeners ([`tls`], [`run`]), the operator
//! commands ([`commands`]) and the choice of storage backend from the
//! database URL. Integration tests start the real server through [`run::start`].
//!
//! This is the only crate that reads files, environment variables and
//! sockets' addresses; it wires the inner crates together and holds no
//! business rule of its own.

pub mod commands;
pub mod config;
pub mod mail;
pub mod metrics;
pub mod run;
pub mod tls;

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use gatehouse_auth::MasterKey;
use gatehouse_store::Store;

/// Opens the storage named by `database_url` (D40, D44): PostgreSQL for
/// `postgres://` and `postgresql://` URLs, SQLite for `sqlite:` URLs and
/// plain paths. Migrations are applied on open.
pub async fn open_store(database_url: &str) -> anyhow::Result<Arc<dyn Store>> {
    if database_url.starts_with("postgres://") || database_url.starts_with("postgresql://") {
        let store = gatehouse_store_postgres::PgStore::connect(database_url)
            .await
            .map_err(|e| anyhow::anyhow!("opening the PostgreSQL database: {e}"))?;
        return Ok(Arc::new(store));
    }
    let path = database_url
        .strip_prefix("sqlite://")
        .or_else(|| database_url.strip_prefix("sqlite:"))
        .unwrap_or(database_url);
    let path = path.split('?').next().unwrap_or(path);
    let store = gatehouse_store_sqlite::SqliteStore::open(Path::new(path))
        .with_context(|| format!("opening the SQLite database at {path}"))?;
    Ok(Arc::new(store))
}

/// The key-encryption key (D23): `GATEHOUSE_MASTER_KEY`, else
/// `<data_dir>/master.key`, created with mode 0600 on first start.
pub fn load_master_key(env_value: Option<&str>, data_dir: &Path) -> anyhow::Result<MasterKey> {
    if let Some(v) = env_value.filter(|v| !v.trim().is_empty()) {
        return MasterKey::parse(v).map_err(|e| anyhow::anyhow!("GATEHOUSE_MASTER_KEY: {e}"));
    }
    let path = data_dir.join("master.key");
    match std::fs::read_to_string(&path) {
        Ok(text) => MasterKey::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = MasterKey::generate();
            write_private_file(&path, key.to_text().as_bytes())?;
            tracing::info!(path = %path.display(), "created a new master key");
            Ok(key)
        }
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Writes a file readable only by its owner, atomically (temporary name, then rename).
pub fn write_private_file(path: &Path, contents: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    f.write_all(contents)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
