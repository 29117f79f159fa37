//! A throwaway PostgreSQL server for tests (feature `testing`).
//!
//! [`fresh_store`] gives each test a new, empty, migrated database
//! (`CREATE DATABASE t_…`) on a server started once per test process
//! ([`TempCluster::shared`]):
//!
//! * With `GATEHOUSE_TEST_POSTGRES_URL` set (an admin URL of a running
//!   server, allowed to create databases), the databases are created there
//!   and left behind: point it at a throwaway server.
//! * Otherwise a temporary cluster: `initdb` into a temporary directory
//!   (trust authentication, UTF8), then `postgres` listening on 127.0.0.1 at
//!   a free port and on a Unix socket in that directory, with `fsync` off.
//!   The binaries are found as `initdb` on `PATH` (with `postgres` beside
//!   its real location), else in the newest `/usr/lib/postgresql/*/bin`.
//! * As root (where `initdb` and `postgres` refuse to run), both run as the
//!   `postgres` user if there is one, else as `nobody`; the directory is
//!   handed to that user.
//! * The server is a direct child of the test process (not daemonized by
//!   `pg_ctl`, which would cut that tie), started through util-linux's
//!   `setpriv --pdeathsig QUIT`, which sets the parent-death signal and
//!   execs `postgres` in place (same pid): SIGQUIT, PostgreSQL's immediate
//!   shutdown, reaches it whenever the test process ends, normally or
//!   killed. No postgres process outlives `cargo test`. The directory of a
//!   cluster whose test process and server are both gone is removed by the
//!   next cluster's start (`remove_stale_dirs`), so at most the last run's
//!   directory is left in the temporary directory.
//! * Without binaries: if `GATEHOUSE_REQUIRE_POSTGRES=1`, tests fail with a
//!   clear message; otherwise [`fresh_store`] prints "skipped: PostgreSQL
//!   binaries not found" to stderr and returns `None`, and the test returns.
//! * [`StoppableCluster`] is a cluster of a test's own that it can stop
//!   (`pg_ctl stop -m fast`) and start again on the same port and data
//!   directory, for failure drills (`crates/gatehouse/tests/drills.rs`).

// No `unsafe` here either (the workspace forbids it): signals go through
// rustix's safe wrappers, the parent-death signal is set by `setpriv` rather
// than in a `pre_exec` hook, and user look-ups ask `id`.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, mpsc};

use rustix::process::{Pid, Signal};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sqlx_core::connection::Connection;
use sqlx_core::executor::Executor;
use sqlx_core::url::Url;
use sqlx_postgres::PgConnection;

use crate::{PgOptions, PgStore};

/// Set to `1` to make missing PostgreSQL binaries a test failure.
pub const REQUIRE_ENV: &str = "GATEHOUSE_REQUIRE_POSTGRES";
/// An admin URL of an existing server to create the test databases on.
pub const URL_ENV: &str = "GATEHOUSE_TEST_POSTGRES_URL";

const DIR_PREFIX: &str = "gatehouse-pg-";

/// The server test databases are created on, started once per process.
#[derive(Debug)]
pub struct TempCluster {
    /// An admin URL (database `postgres` on a temporary cluster).
    admin: Url,
    /// The temporary cluster's directory and postmaster, if we started one.
    local: Option<(PathBuf, u32)>,
}

impl TempCluster {
    /// The process-wide server, started on first use. `None` when no
    /// PostgreSQL binaries exist here (and `GATEHOUSE_REQUIRE_POSTGRES` is
    /// not `1`; then this panics). Panics when a server cannot be started.
    pub fn shared() -> Option<&'static TempCluster> {
        static SERVER: OnceLock<Result<Option<TempCluster>, String>> = OnceLock::new();
        match SERVER.get_or_init(start) {
            Ok(Some(s)) => Some(s),
            Ok(None) if required() => panic!(
                "PostgreSQL binaries not found (initdb and postgres on PATH or in \
                 /usr/lib/postgresql/*/bin) and {REQUIRE_ENV}=1: install PostgreSQL \
                 (e.g. apt-get install postgresql) or set {URL_ENV}"
            ),
            Ok(None) => {
                // Once per process, straight to the stderr handle: the test
                // harness captures `eprintln!` of passing tests.
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    let _ = writeln!(
                        io::stderr(),
                        "\n*** skipped: PostgreSQL binaries not found (initdb and postgres on \
                         PATH or in /usr/lib/postgresql/*/bin): the PostgreSQL store tests \
                         pass without running; set {REQUIRE_ENV}=1 to fail instead ***\n"
                    );
                });
                None
            }
            Err(e) => panic!("{e}"),
        }
    }

    /// The URL of `database` on this server.
    pub fn url(&self, database: &str) -> String {
        let mut u = self.admin.clone();
        u.set_path(&format!("/{database}"));
        u.to_string()
    }

    /// The port of the temporary cluster (`None` for an external server).
    pub fn port(&self) -> Option<u16> {
        self.local.as_ref().and(self.admin.port())
    }

    /// Creates a new, empty database and returns its URL.
    pub async fn create_database(&self) -> String {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name = format!(
            "t_{}_{}_{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let admin = self.admin.to_string();
        let mut c = PgConnection::connect(&admin)
            .await
            .unwrap_or_else(|e| panic!("connecting to the test server {admin}: {e}"));
        c.execute(format!("CREATE DATABASE {name} ENCODING 'UTF8' TEMPLATE template0").as_str())
            .await
            .unwrap_or_else(|e| panic!("creating the test database {name}: {e}"));
        let _ = c.close().await;
        self.url(&name)
    }

    /// A store on a new database, migrated.
    pub async fn fresh_store(&self) -> PgStore {
        let url = self.create_database().await;
        let options = PgOptions {
            max_connections: 8,
            ..PgOptions::default()
        };
        PgStore::connect_with(&url, options)
            .await
            .unwrap_or_else(|e| panic!("opening the test database {url}: {e}"))
    }
}

/// A store on a new database of the shared server; `None` (after a loud
/// message) when the tests must be skipped. See the module docs.
pub async fn fresh_store() -> Option<PgStore> {
    Some(TempCluster::shared()?.fresh_store().await)
}

/// The URL of a new, empty database of the shared server (not migrated).
pub async fn fresh_database_url() -> Option<String> {
    Some(TempCluster::shared()?.create_database().await)
}

/// A temporary cluster of its own that a test can stop and start again on
/// the same port and data directory: failure drills take the database away
/// under a running service and give it back. Unlike [`TempCluster::shared`]
/// it is never pointed at `GATEHOUSE_TEST_POSTGRES_URL` (a drill must not
/// stop a server it does not own). Dropping it stops the server (immediate
/// shutdown) and removes the directory; the parent-death signal of
/// [`spawn_postgres`] covers a test process that is killed.
#[derive(Debug)]
pub struct StoppableCluster {
    bin: PathBuf,
    dir: PathBuf,
    data: PathBuf,
    log_path: PathBuf,
    user: Option<(u32, u32)>,
    port: u16,
    /// The running postmaster, `None` while stopped.
    pid: Option<u32>,
}

impl StoppableCluster {
    /// Initializes and starts a new cluster. `None` (after a loud message)
    /// without PostgreSQL binaries, unless `GATEHOUSE_REQUIRE_POSTGRES=1`,
    /// where that panics, as does a cluster that cannot be started.
    pub fn start() -> Option<Self> {
        let Some(bin) = find_bin_dir() else {
            if required() {
                panic!(
                    "PostgreSQL binaries not found (initdb and postgres on PATH or in \
                     /usr/lib/postgresql/*/bin) and {REQUIRE_ENV}=1: install PostgreSQL \
                     (e.g. apt-get install postgresql)"
                );
            }
            let _ = writeln!(
                io::stderr(),
                "\n*** skipped: PostgreSQL binaries not found (initdb and postgres on PATH \
                 or in /usr/lib/postgresql/*/bin): this test passes without running; set \
                 {REQUIRE_ENV}=1 to fail instead ***\n"
            );
            return None;
        };
        let ClusterDir {
            dir,
            data,
            log: _,
            log_path,
            user,
        } = init_cluster(&bin).unwrap_or_else(|e| panic!("{e}"));
        let mut cluster = Self {
            bin,
            dir,
            data,
            log_path,
            user,
            port: 0,
            pid: None,
        };
        let mut last_error = String::new();
        for _ in 0..5 {
            cluster.port = free_port().unwrap_or_else(|e| panic!("{e}"));
            match cluster.spawn() {
                Ok(()) => return Some(cluster),
                Err((retry, e)) => {
                    last_error = e;
                    if !retry {
                        break;
                    }
                }
            }
        }
        panic!("could not start PostgreSQL: {last_error}");
    }

    fn spawn(&mut self) -> Result<(), (bool, String)> {
        let log = fs::OpenOptions::new()
            .append(true)
            .open(&self.log_path)
            .map_err(|e| (false, format!("{}: {e}", self.log_path.display())))?;
        let pid = spawn_postgres(
            &self.bin,
            &self.dir,
            &self.data,
            self.port,
            self.user,
            &log,
            &self.log_path,
        )?;
        self.pid = Some(pid);
        Ok(())
    }

    /// The URL of `database` on this server.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/{database}?sslmode=disable",
            self.port
        )
    }

    /// The TCP port, the same across restarts.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Creates an empty database `name` and returns its URL.
    pub async fn create_database(&self, name: &str) -> String {
        let admin = self.url("postgres");
        let mut c = PgConnection::connect(&admin)
            .await
            .unwrap_or_else(|e| panic!("connecting to {admin}: {e}"));
        c.execute(format!("CREATE DATABASE {name} ENCODING 'UTF8' TEMPLATE template0").as_str())
            .await
            .unwrap_or_else(|e| panic!("creating the database {name}: {e}"));
        let _ = c.close().await;
        self.url(name)
    }

    /// `pg_ctl stop -m fast`: SIGINT to the postmaster, which ends every
    /// session (SQLSTATE 57P01 to those in a query) and exits after a
    /// checkpoint. Returns once the process is gone (panics after 30 s).
    pub fn stop_fast(&mut self) {
        let Some(pid) = self.pid.take() else {
            return;
        };
        // Our own child: signal 0 only checks that it exists (the thread
        // waiting for it reaps it at once).
        signal(pid, Signal::INT);
        let deadline = Instant::now() + Duration::from_secs(30);
        while exists(pid) {
            assert!(
                Instant::now() < deadline,
                "postgres did not stop within 30 s:\n{}",
                log_tail(&self.log_path)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Starts the server again on the same port and data directory; returns
    /// once it accepts connections (panics if it cannot).
    pub fn start_again(&mut self) {
        assert!(self.pid.is_none(), "the server is running");
        if let Err((_, e)) = self.spawn() {
            panic!("restarting PostgreSQL on port {}: {e}", self.port);
        }
    }

    /// The end of the server's log.
    pub fn log_tail(&self) -> String {
        log_tail(&self.log_path)
    }
}

impl Drop for StoppableCluster {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.take() {
            signal(pid, Signal::QUIT);
            let deadline = Instant::now() + Duration::from_secs(10);
            while exists(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if exists(pid) {
                signal(pid, Signal::KILL);
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn required() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| v.trim() == "1")
}

fn start() -> Result<Option<TempCluster>, String> {
    if let Some(url) = std::env::var(URL_ENV).ok().filter(|u| !u.trim().is_empty()) {
        let admin = Url::parse(url.trim()).map_err(|e| format!("{URL_ENV}: {e}"))?;
        return Ok(Some(TempCluster { admin, local: None }));
    }
    let Some(bin) = find_bin_dir() else {
        return Ok(None);
    };
    start_cluster(&bin).map(Some)
}

/// `initdb` on PATH with `postgres` beside it (following symlinks such as
/// /usr/local/bin/initdb → /usr/lib/postgresql/15/bin/initdb), else the
/// newest /usr/lib/postgresql/*/bin.
fn find_bin_dir() -> Option<PathBuf> {
    let complete = |d: &Path| d.join("initdb").is_file() && d.join("postgres").is_file();
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let initdb = dir.join("initdb");
            if !initdb.is_file() {
                continue;
            }
            if let Some(real) = fs::canonicalize(&initdb)
                .ok()
                .and_then(|p| p.parent().map(Path::to_path_buf))
                .filter(|d| complete(d))
            {
                return Some(real);
            }
            if complete(&dir) {
                return Some(dir);
            }
        }
    }
    let mut found: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            complete(&bin).then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

/// The user to run PostgreSQL as: `None` (ourselves) unless we are root.
fn unprivileged_user() -> Result<Option<(u32, u32)>, String> {
    if !rustix::process::geteuid().is_root() {
        return Ok(None);
    }
    for name in ["postgres", "nobody"] {
        if let (Some(uid), Some(gid)) = (id_of(name, "-u"), id_of(name, "-g"))
            && uid != 0
        {
            return Ok(Some((uid, gid)));
        }
    }
    Err(
        "running as root, where initdb and postgres refuse to run, and there is neither \
         a `postgres` nor a `nobody` user to run them as"
            .into(),
    )
}

/// `id -u NAME` / `id -g NAME`: the system's own look-up (NSS included).
fn id_of(name: &str, which: &str) -> Option<u32> {
    let out = Command::new("id")
        .args([which, name])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8(out.stdout).ok()?.trim().parse().ok()
}

/// Sends `sig` to `pid`; a process that is gone already is no error here.
fn signal(pid: u32, sig: Signal) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

/// Whether `pid` exists (signal 0), a zombie not yet reaped included.
fn exists(pid: u32) -> bool {
    i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .is_some_and(|p| rustix::process::test_kill_process(p).is_ok())
}

/// Whether `pid` is a running process: not gone and not a zombie (PID 1 of
/// a container may leave an orphan unreaped for a long time).
fn running(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // `pid (comm) state …`: the state follows the last `)`.
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
    })
}

fn as_user(cmd: &mut Command, user: Option<(u32, u32)>) {
    if let Some((uid, gid)) = user {
        // std drops the supplementary groups too when root changes uid.
        cmd.uid(uid).gid(gid);
    }
}

/// The file in a cluster directory naming the test process that owns it.
const OWNER_FILE: &str = "owner.pid";

/// Removes the directories of earlier clusters whose test process and
/// server are both gone (their server died with the test process by the
/// parent-death signal; nothing else removes the directory).
fn remove_stale_dirs(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    let pid_in = |path: PathBuf| -> Option<u32> {
        fs::read_to_string(path)
            .ok()?
            .lines()
            .next()?
            .trim()
            .parse()
            .ok()
    };
    for e in entries.flatten() {
        let path = e.path();
        let is_ours = e
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(DIR_PREFIX));
        if !is_ours {
            continue;
        }
        // No owner file: a directory being set up right now (or one of an
        // older harness); leave it unless it is an hour old.
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(3600));
        let owner_gone = pid_in(path.join(OWNER_FILE)).map_or(old, |pid| !running(pid));
        let server_gone = pid_in(path.join("data/postmaster.pid")).is_none_or(|pid| !running(pid));
        if owner_gone && server_gone {
            let _ = fs::remove_dir_all(&path);
        }
    }
}

fn log_tail(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut f) = File::open(path) {
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = f.seek(SeekFrom::Start(len.saturating_sub(4000)));
        let _ = f.read_to_string(&mut text);
    }
    text
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("finding a free port: {e}"))
}

/// A fresh cluster directory (`data/` initialized, `postgres.log`), owned
/// by the user PostgreSQL runs as.
struct ClusterDir {
    dir: PathBuf,
    data: PathBuf,
    log: File,
    log_path: PathBuf,
    user: Option<(u32, u32)>,
}

fn init_cluster(bin: &Path) -> Result<ClusterDir, String> {
    let user = unprivileged_user()?;
    // Another user must be able to reach the directory: use /tmp as root
    // (TMPDIR might be private to root).
    let base = if user.is_some() {
        PathBuf::from("/tmp")
    } else {
        std::env::temp_dir()
    };
    remove_stale_dirs(&base);
    let dir = tempfile::Builder::new()
        .prefix(DIR_PREFIX)
        .tempdir_in(&base)
        .map_err(|e| format!("creating a directory in {}: {e}", base.display()))?
        .keep();
    let cleanup = |msg: String| {
        let _ = fs::remove_dir_all(&dir);
        msg
    };
    if let Some((uid, gid)) = user {
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
            .map_err(|e| cleanup(format!("handing {} to uid {uid}: {e}", dir.display())))?;
    }
    fs::write(dir.join(OWNER_FILE), format!("{}\n", std::process::id()))
        .map_err(|e| cleanup(format!("writing {}: {e}", dir.display())))?;
    let data = dir.join("data");
    let log_path = dir.join("postgres.log");
    let log = File::create(&log_path)
        .map_err(|e| cleanup(format!("creating {}: {e}", log_path.display())))?;
    if let Some((uid, gid)) = user {
        let _ = std::os::unix::fs::chown(&log_path, Some(uid), Some(gid));
    }
    let log_for = |log: &File| {
        log.try_clone()
            .map(Stdio::from)
            .map_err(|e| format!("log file: {e}"))
    };

    // initdb: UTF8 with the C.UTF-8 locale if the system has it, else the
    // plain C locale (the store folds case itself, so either works).
    let mut initialized = false;
    for locale in ["--locale=C.UTF-8", "--no-locale"] {
        let mut cmd = Command::new(bin.join("initdb"));
        cmd.arg("-D")
            .arg(&data)
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-sync",
                locale,
            ])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(log_for(&log).map_err(&cleanup)?)
            .stderr(log_for(&log).map_err(&cleanup)?);
        as_user(&mut cmd, user);
        let status = cmd
            .status()
            .map_err(|e| cleanup(format!("running {}: {e}", bin.join("initdb").display())))?;
        if status.success() {
            initialized = true;
            break;
        }
        let _ = fs::remove_dir_all(&data);
    }
    if !initialized {
        let tail = log_tail(&log_path);
        return Err(cleanup(format!("initdb failed:\n{tail}")));
    }
    Ok(ClusterDir {
        dir,
        data,
        log,
        log_path,
        user,
    })
}

fn start_cluster(bin: &Path) -> Result<TempCluster, String> {
    let ClusterDir {
        dir,
        data,
        log,
        log_path,
        user,
    } = init_cluster(bin)?;
    let cleanup = |msg: String| {
        let _ = fs::remove_dir_all(&dir);
        msg
    };

    // A port picked now may be taken before the server binds it: try again.
    let mut last_error = String::new();
    for _ in 0..5 {
        let port = free_port().map_err(&cleanup)?;
        match spawn_postgres(bin, &dir, &data, port, user, &log, &log_path) {
            Ok(pid) => {
                let admin = Url::parse(&format!(
                    "postgres://postgres@127.0.0.1:{port}/postgres?sslmode=disable"
                ))
                .expect("a valid URL");
                return Ok(TempCluster {
                    admin,
                    local: Some((dir, pid)),
                });
            }
            Err((retry, e)) => {
                last_error = e;
                if !retry {
                    break;
                }
            }
        }
    }
    Err(cleanup(format!(
        "could not start PostgreSQL ({}): {last_error}",
        bin.join("postgres").display()
    )))
}

/// Starts `postgres` on a thread of its own, which stays blocked waiting
/// for it: the parent-death signal fires when the thread that forked the
/// child ends, so that thread must live as long as the server.
/// Err((whether another port may help, message)).
fn spawn_postgres(
    bin: &Path,
    dir: &Path,
    data: &Path,
    port: u16,
    user: Option<(u32, u32)>,
    log: &File,
    log_path: &Path,
) -> Result<u32, (bool, String)> {
    let offset = fs::metadata(log_path).map(|m| m.len()).unwrap_or(0);
    let stdio = || {
        log.try_clone()
            .map(Stdio::from)
            .map_err(|e| (false, format!("log file: {e}")))
    };
    // setpriv sets the parent-death signal after `as_user` changed the uid
    // (a uid change would clear it) and execs postgres in its place.
    let mut cmd = Command::new("setpriv");
    cmd.args(["--pdeathsig", "QUIT"])
        .arg(bin.join("postgres"))
        .arg("-D")
        .arg(data)
        .arg("-p")
        .arg(port.to_string())
        .arg("-c")
        .arg("listen_addresses=127.0.0.1")
        .arg("-c")
        .arg(format!("unix_socket_directories={}", dir.display()))
        .args([
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
            "-c",
            "max_connections=200",
        ])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(stdio()?)
        .stderr(stdio()?);
    as_user(&mut cmd, user);
    let exited = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    {
        let exited = exited.clone();
        std::thread::Builder::new()
            .name("gatehouse-postgres".into())
            .spawn(move || match cmd.spawn() {
                Err(e) => {
                    let _ = tx.send(Err(e.to_string()));
                }
                Ok(mut child) => {
                    let _ = tx.send(Ok(child.id()));
                    let _ = child.wait();
                    exited.store(true, Ordering::SeqCst);
                }
            })
            .map_err(|e| (false, format!("starting a thread: {e}")))?;
    }
    let pid = rx
        .recv()
        .map_err(|e| (false, e.to_string()))?
        .map_err(|e| (false, format!("running postgres: {e}")))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let log_now = {
            let mut text = String::new();
            if let Ok(mut f) = File::open(log_path) {
                let _ = f.seek(SeekFrom::Start(offset));
                let _ = f.read_to_string(&mut text);
            }
            text
        };
        if log_now.contains("ready to accept connections") {
            return Ok(pid);
        }
        if exited.load(Ordering::SeqCst) {
            let port_taken = log_now.contains("could not bind")
                || log_now.contains("Address already in use")
                || log_now.contains("could not create any TCP/IP sockets");
            return Err((port_taken, format!("postgres exited:\n{log_now}")));
        }
        if Instant::now() > deadline {
            signal(pid, Signal::QUIT);
            return Err((false, format!("postgres not ready after 60 s:\n{log_now}")));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// One `bigint` a test reads straight from the database at `url` (`sql`
/// selects exactly one row of one `bigint` column), for checks of what is
/// stored that no store method shows.
pub async fn query_i64(url: &str, sql: &str) -> i64 {
    let mut c = PgConnection::connect(url)
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
    let v: i64 = sqlx_core::query_scalar::query_scalar(sql)
        .fetch_one(&mut c)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let _ = c.close().await;
    v
}

/// Runs one statement on the database at `url` as a person with database
/// access would (a tamper test's hand edit): the rows it changed, or the
/// database's refusal.
pub async fn execute(url: &str, sql: &str) -> Result<u64, String> {
    let mut c = PgConnection::connect(url)
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
    let r = sqlx_core::query::query(sql)
        .execute(&mut c)
        .await
        .map(|r| r.rows_affected())
        .map_err(|e| e.to_string());
    let _ = c.close().await;
    r
}
