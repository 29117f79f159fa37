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
#[cfg(feature = "test-dns")]
pub mod dns;
pub mod mail;
pub mod metrics;
pub mod out;
pub mod run;
pub mod tls;
pub mod webhook_sender;

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use gatehouse_auth::MasterKey;
use gatehouse_store::Store;

/// The SQLite file a `sqlite:` URL or plain path names, or `None` for a
/// PostgreSQL URL.
pub(crate) fn sqlite_path(database_url: &str) -> Option<&str> {
    if database_url.starts_with("postgres://") || database_url.starts_with("postgresql://") {
        return None;
    }
    let path = database_url
        .strip_prefix("sqlite://")
        .or_else(|| database_url.strip_prefix("sqlite:"))
        .unwrap_or(database_url);
    Some(path.split('?').next().unwrap_or(path))
}

/// Opens the storage of an operator command (D47): like [`open_store`], but
/// it never creates a database — only `serve`, `migrate` and `mock` do. A
/// missing one is a `DATABASE_NOT_FOUND` failure that says where the command
/// looked and how to point it elsewhere.
pub async fn open_existing_store(settings: &config::Settings) -> anyhow::Result<Arc<dyn Store>> {
    let url = &settings.database_url;
    let defaulted = *url == config::Settings::with_data_dir(settings.data_dir.clone()).database_url;
    let how = format!(
        "Run `gatehouse migrate` (or start `gatehouse serve`) with the same settings to create it, \
         or point this command at the database your server uses with --data-dir DIR \
         (or GATEHOUSE_DATA_DIR; it holds gatehouse.db) or --database-url URL (or GATEHOUSE_DATABASE_URL){}.",
        if settings.env == config::Env::Staging {
            "; staging uses <data-dir>/staging/"
        } else {
            ""
        }
    );
    match sqlite_path(url) {
        Some(path) if path != ":memory:" && !Path::new(path).exists() => {
            let from = if defaulted {
                format!("the data directory {}", settings.data_dir.display())
            } else {
                "the database URL".to_owned()
            };
            Err(commands::failure(
                commands::DATABASE_NOT_FOUND,
                format!(
                    "no database at {path} (from {from}); this command does not create one. {how}"
                ),
            ))
        }
        Some(_) => open_store(url).await,
        None => match gatehouse_store_postgres::PgStore::connect(url).await {
            Ok(store) => Ok(Arc::new(store)),
            Err(e) if e.to_string().contains("does not exist") => Err(commands::failure(
                commands::DATABASE_NOT_FOUND,
                format!(
                    "the PostgreSQL database at {} does not exist ({e}); this command does not create one. \
                     Create it (createdb), then {how}",
                    config::redact_url(url)
                ),
            )),
            Err(e) => Err(anyhow::anyhow!("opening the PostgreSQL database: {e}")),
        },
    }
}

/// Opens the storage named by `database_url` (D40, D44): PostgreSQL for
/// `postgres://` and `postgresql://` URLs, SQLite for `sqlite:` URLs and
/// plain paths. Migrations are applied on open.
pub async fn open_store(database_url: &str) -> anyhow::Result<Arc<dyn Store>> {
    let Some(path) = sqlite_path(database_url) else {
        let store = gatehouse_store_postgres::PgStore::connect(database_url)
            .await
            .map_err(|e| anyhow::anyhow!("opening the PostgreSQL database: {e}"))?;
        return Ok(Arc::new(store));
    };
    // D58: SQLite seals each audit entry as it writes it (one writer, so
    // write order is commit order); PostgreSQL's are sealed after commit.
    let store = gatehouse_store_sqlite::SqliteStore::open(Path::new(path))
        .with_context(|| format!("opening the SQLite database at {path}"))?
        .sealing_audit_at_insert(gatehouse_auth::audit::seal_entry);
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

/// Where the master key of a process comes from (D23).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MasterKeySource {
    /// `GATEHOUSE_MASTER_KEY`.
    Environment,
    /// A file, `<data_dir>/master.key`.
    File(std::path::PathBuf),
}

/// The master key of an operator command that must not create one
/// (`gatehouse master-key rotate`), and where it came from.
pub fn existing_master_key(
    env_value: Option<&str>,
    data_dir: &Path,
) -> anyhow::Result<(MasterKey, MasterKeySource)> {
    if let Some(v) = env_value.filter(|v| !v.trim().is_empty()) {
        let key = MasterKey::parse(v).map_err(|e| anyhow::anyhow!("GATEHOUSE_MASTER_KEY: {e}"))?;
        return Ok((key, MasterKeySource::Environment));
    }
    let path = data_dir.join("master.key");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading the master key at {} (set GATEHOUSE_MASTER_KEY or --data-dir)",
            path.display()
        )
    })?;
    let key = MasterKey::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok((key, MasterKeySource::File(path)))
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
    // The rename itself survives a crash once the directory is on disk.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("syncing {}", dir.display()))?;
    }
    Ok(())
}
