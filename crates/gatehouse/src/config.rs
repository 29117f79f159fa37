//! Configuration (D40): flags override `GATEHOUSE_*` environment variables,
//! which override an optional TOML file (`--config`), which overrides the
//! defaults.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use serde::Deserialize;

#[derive(Parser, Debug)]
#[command(
    name = "gatehouse",
    version,
    about = "Users, products and an OAuth 2.0 authorization server for organizations"
)]
pub struct Cli {
    /// A TOML file with settings (flags and GATEHOUSE_* variables override it).
    #[arg(long, global = true, env = "GATEHOUSE_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where the database, keys and certificates live [default: ./data].
    #[arg(long, global = true, env = "GATEHOUSE_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// `sqlite://PATH` [default: SQLite in the data directory].
    #[arg(
        long,
        global = true,
        env = "GATEHOUSE_DATABASE_URL",
        value_name = "URL"
    )]
    pub database_url: Option<String>,
    /// Print exactly one JSON object on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the server.
    Serve(ServeArgs),
    /// Apply database migrations (serve also does this at start).
    Migrate,
    /// Manage organizations.
    #[command(subcommand)]
    Org(OrgCommand),
    /// Manage client applications.
    #[command(subcommand)]
    Client(ClientCommand),
    /// Manage users.
    #[command(subcommand)]
    User(UserCommand),
    /// Manage API keys (D27).
    #[command(subcommand)]
    Apikey(ApiKeyCommand),
}

#[derive(Subcommand, Debug)]
pub enum ApiKeyCommand {
    /// Create an API key with a fixed set of scopes; prints the key once.
    Create {
        #[arg(long)]
        org: String,
        #[arg(long)]
        name: String,
        /// Space-separated scopes.
        #[arg(long)]
        scopes: String,
    },
    /// Revoke an API key: it stops working on the next request.
    Revoke { key_id: String },
}

#[derive(Args, Debug, Default, Clone)]
pub struct ServeArgs {
    /// The public address clients use, for `iss`, links and redirects [default: https://localhost:8443].
    #[arg(long, env = "GATEHOUSE_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// HTTPS listener [default: 127.0.0.1:8443].
    #[arg(long, env = "GATEHOUSE_HTTPS_ADDR")]
    pub https_addr: Option<SocketAddr>,
    /// Plain-HTTP listener: 301 to HTTPS, or the app itself with --behind-proxy [default: 127.0.0.1:8080].
    #[arg(long, env = "GATEHOUSE_HTTP_ADDR")]
    pub http_addr: Option<SocketAddr>,
    /// Serve plain HTTP behind a TLS-terminating proxy (D31).
    #[arg(long, env = "GATEHOUSE_BEHIND_PROXY")]
    pub behind_proxy: bool,
    /// PEM certificate chain [default: a self-signed certificate in the data directory].
    #[arg(long, env = "GATEHOUSE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key.
    #[arg(long, env = "GATEHOUSE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum OrgCommand {
    /// Create an organization.
    Create {
        #[arg(long)]
        name: String,
        /// free (default), pro or enterprise.
        #[arg(long)]
        plan: Option<String>,
        /// Enterprise: requests per minute.
        #[arg(long)]
        per_minute: Option<u32>,
        /// Enterprise: requests per second.
        #[arg(long)]
        per_second: Option<u32>,
    },
}

#[derive(Subcommand, Debug)]
pub enum ClientCommand {
    /// Register a client application; prints its secret once.
    Create {
        #[arg(long)]
        org: String,
        #[arg(long)]
        name: String,
        /// Space-separated scopes the client may be granted.
        #[arg(long)]
        scopes: String,
        /// A redirect URI (repeat for several).
        #[arg(long = "redirect-uri")]
        redirect_uris: Vec<String>,
        /// A public client (no secret; authorization code with PKCE only).
        #[arg(long)]
        public: bool,
        /// The user who owns the client.
        #[arg(long)]
        owner: Option<String>,
    },
    /// Allow the admin scope for a client (D22).
    ApproveAdmin { client_id: String },
}

#[derive(Subcommand, Debug)]
pub enum UserCommand {
    /// Create an active user with a password (no invitation).
    Create {
        #[arg(long)]
        org: String,
        #[arg(long)]
        email: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        role: String,
        /// Read the password from the first line of standard input.
        #[arg(long, required = true)]
        password_stdin: bool,
    },
}

/// The TOML file: every key optional.
#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub data_dir: Option<PathBuf>,
    pub database_url: Option<String>,
    pub public_url: Option<String>,
    pub https_addr: Option<SocketAddr>,
    pub http_addr: Option<SocketAddr>,
    pub admin_addr: Option<SocketAddr>,
    pub behind_proxy: Option<bool>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub smtp_url: Option<String>,
}

/// Settings after merging flags, environment, file and defaults.
#[derive(Clone, Debug)]
pub struct Settings {
    pub data_dir: PathBuf,
    pub database_url: String,
    pub public_url: String,
    pub https_addr: SocketAddr,
    pub http_addr: SocketAddr,
    pub behind_proxy: bool,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// From `GATEHOUSE_MASTER_KEY` only (never a flag: flags show in `ps`).
    pub master_key: Option<String>,
}

impl Settings {
    /// Defaults for a data directory (used by tests, which then set addresses).
    pub fn with_data_dir(data_dir: PathBuf) -> Self {
        Self {
            database_url: format!("sqlite://{}", data_dir.join("gatehouse.db").display()),
            data_dir,
            public_url: "https://localhost:8443".into(),
            https_addr: "127.0.0.1:8443".parse().unwrap(),
            http_addr: "127.0.0.1:8080".parse().unwrap(),
            behind_proxy: false,
            tls_cert: None,
            tls_key: None,
            master_key: None,
        }
    }

    pub fn resolve(cli: &Cli, serve: &ServeArgs) -> anyhow::Result<Self> {
        let file: FileConfig = match &cli.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?
            }
            None => FileConfig::default(),
        };
        let data_dir = cli
            .data_dir
            .clone()
            .or(file.data_dir)
            .unwrap_or_else(|| PathBuf::from("./data"));
        let mut s = Self::with_data_dir(data_dir);
        if let Some(u) = cli.database_url.clone().or(file.database_url) {
            s.database_url = u;
        }
        if let Some(u) = serve.public_url.clone().or(file.public_url) {
            s.public_url = u.trim_end_matches('/').to_owned();
        }
        if let Some(a) = serve.https_addr.or(file.https_addr) {
            s.https_addr = a;
        }
        if let Some(a) = serve.http_addr.or(file.http_addr) {
            s.http_addr = a;
        }
        s.behind_proxy = serve.behind_proxy || file.behind_proxy.unwrap_or(false);
        s.tls_cert = serve.tls_cert.clone().or(file.tls_cert);
        s.tls_key = serve.tls_key.clone().or(file.tls_key);
        if s.tls_cert.is_some() != s.tls_key.is_some() {
            anyhow::bail!("tls_cert and tls_key go together");
        }
        s.master_key = std::env::var("GATEHOUSE_MASTER_KEY").ok();
        if !(s.public_url.starts_with("https://") || s.public_url.starts_with("http://")) {
            anyhow::bail!("public_url must start with https:// (got {})", s.public_url);
        }
        Ok(s)
    }
}
