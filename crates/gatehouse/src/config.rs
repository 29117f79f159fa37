//! Configuration (D40): flags override `GATEHOUSE_*` environment variables,
//! which override an optional TOML file (`--config`), which overrides the
//! defaults.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use serde::Deserialize;

/// No `Debug`: it holds the database URL, whose password must not reach a
/// log (see [`Settings`]'s redacted `Debug`).
#[derive(Parser)]
#[command(
    name = "gatehouse",
    version,
    about = "Users, products and an OAuth 2.0 authorization server for organizations"
)]
pub struct Cli {
    /// A TOML file with settings; flags and GATEHOUSE_* environment variables override what it says.
    #[arg(long, global = true, env = "GATEHOUSE_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The directory holding the SQLite database (gatehouse.db), the master key and the TLS certificate [default: ./data].
    #[arg(long, global = true, env = "GATEHOUSE_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// The database to use: sqlite://PATH for a SQLite file, or postgres://USER:PASSWORD@HOST/NAME for PostgreSQL [default: the SQLite file gatehouse.db in the data directory].
    #[arg(
        long,
        global = true,
        env = "GATEHOUSE_DATABASE_URL",
        value_name = "URL"
    )]
    pub database_url: Option<String>,
    /// Print the result as exactly one JSON object on standard output, for scripts; a failure prints {"error": {"code", "message"}} and exits with status 1.
    #[arg(long, global = true)]
    pub json: bool,
    /// Which environment to work on: production (default) or staging. Staging
    /// keeps its own database (in <data-dir>/staging/ unless --database-url
    /// says otherwise), starts organizations with sample data, restores it
    /// every night and issues gk_test_ API keys.
    #[arg(long, global = true, env = "GATEHOUSE_ENV", value_enum)]
    pub env: Option<Env>,
    #[command(subcommand)]
    pub command: Command,
}

/// The environment a server or command works on (production or staging).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Env {
    #[default]
    Production,
    Staging,
}

// `ServeArgs` makes `Serve` large; the enum is built once per process.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum Command {
    /// Run the server (creates and migrates the database if needed).
    Serve(ServeArgs),
    /// Create the database if needed and bring its tables up to date (serve
    /// also does this when it starts). Other commands need a database that
    /// exists: run this first.
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
    /// Manage API keys (long-lived credentials with a fixed set of scopes).
    #[command(subcommand)]
    Apikey(ApiKeyCommand),
    /// Look at webhook endpoints and their deliveries.
    #[command(subcommand)]
    Webhook(WebhookCommand),
    /// Check an organization's audit log.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Manage the keys that sign access tokens.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Look at or end a token of any organization: an access token, a
    /// refresh token or an API key. Needs the master key, and the server's
    /// public URL (GATEHOUSE_PUBLIC_URL or the configuration file's), which its access
    /// tokens name as their issuer.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Manage the master key, under which signing keys and other stored
    /// secrets are encrypted.
    #[command(subcommand)]
    MasterKey(MasterKeyCommand),
    /// Print the OpenAPI document describing the HTTP API.
    Openapi,
    /// Work on the staging environment (implies --env staging).
    #[command(subcommand)]
    Staging(StagingCommand),
    /// Serve the API from memory over plain HTTP with sample data and the
    /// fixed client mock_client / mock_secret, for developing API clients;
    /// nothing is kept after it stops.
    Mock {
        /// The address and port to listen on.
        #[arg(long, env = "GATEHOUSE_MOCK_ADDR", default_value = "127.0.0.1:4010")]
        addr: SocketAddr,
    },
}

#[derive(Subcommand, Debug)]
pub enum StagingCommand {
    /// Restore the sample users and products of every staging organization
    /// now, all at once; organizations, client applications and API keys stay.
    Reset,
}

#[derive(Subcommand, Debug)]
pub enum WebhookCommand {
    /// List an organization's webhook endpoints, newest first (never their secrets).
    List {
        /// The organization: its id (org_…) or its name; may be left out when there is only one.
        #[arg(long, env = "GATEHOUSE_ORG", value_name = "ORG")]
        org: Option<String>,
    },
    /// Show one webhook endpoint and its latest delivery attempts.
    Show {
        /// The endpoint (we_…).
        endpoint_id: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum AuditCommand {
    /// Recompute an organization's audit chains from the database, from
    /// the oldest kept checkpoint: every sequence follows the one before it
    /// and every hash matches its entry and the hash before it. Exits 1
    /// naming the first sequence that fails, or the checkpoint it could not
    /// reach.
    Verify {
        /// The organization: its id (org_…) or its name; may be left out when there is only one.
        #[arg(long, env = "GATEHOUSE_ORG", value_name = "ORG")]
        org: Option<String>,
        /// Only this chain: admin or security (both when left out).
        #[arg(long, value_name = "CATEGORY")]
        category: Option<String>,
        /// Checkpoints kept elsewhere (one JWS per line, as received by
        /// webhook or read from GET /v1/audit-logs/checkpoints): each
        /// signature is checked against the audit keys and the chain must
        /// hold each checkpoint's sequence with its hash.
        #[arg(long, value_name = "FILE")]
        checkpoints: Option<std::path::PathBuf>,
    },
    /// Sign a checkpoint of an organization's audit chains now (each
    /// chain's last sealed sequence and hash, with the current signing
    /// key); it is kept, listed and sent as an audit.checkpoint event.
    Checkpoint {
        /// The organization: its id (org_…) or its name; may be left out when there is only one.
        #[arg(long, env = "GATEHOUSE_ORG", value_name = "ORG")]
        org: Option<String>,
        /// Only this chain: admin or security (both when left out).
        #[arg(long, value_name = "CATEGORY")]
        category: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum KeysCommand {
    /// Publish a new key for signing access tokens now; it starts signing
    /// after --publish-delay, so clients can fetch it first.
    Rotate {
        /// Seconds between publishing the new key (at /.well-known/jwks.json)
        /// and signing tokens with it.
        #[arg(long, default_value_t = 3600, value_name = "SECS")]
        publish_delay: u64,
    },
    /// List the keys that sign access tokens: each one's kid, state
    /// (upcoming, signing, retiring, retired), when it was published, when it
    /// signs from and when it leaves /.well-known/jwks.json. Needs no master key.
    List,
}

#[derive(Subcommand, Debug)]
pub enum TokenCommand {
    /// Say whether a token is active and what it carries, as
    /// POST /oauth/introspect answers: organization, subject, client,
    /// scopes, issue and expiry times. Changes nothing.
    Introspect {
        /// The token, or - to read it from standard input (which keeps it
        /// out of the shell's history and the process list).
        token: String,
    },
    /// End a token now: a refresh token ends its whole chain (every token
    /// of that sign-in), an access token stops working at its next use, an
    /// API key is revoked.
    Revoke {
        /// The token, or - to read it from standard input.
        token: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum MasterKeyCommand {
    /// Re-encrypt everything held under the master key with a new key,
    /// while servers run: they learn the new key from the
    /// database, seal with it and read under either key until the rotation
    /// completes, then forget the old one. The new key then replaces
    /// <data_dir>/master.key; when the key comes from GATEHOUSE_MASTER_KEY,
    /// set that to the new key on every node before it next restarts.
    Rotate {
        /// A file holding the new key: 32 random bytes as base64 or 64 hex
        /// digits (e.g. `openssl rand -base64 32 > new.key`).
        #[arg(long, value_name = "FILE")]
        new_key_file: PathBuf,
        /// Seconds, at most, for every running server to report that it
        /// holds the new key (they look every 5 s) before values move.
        #[arg(long, default_value_t = 60, value_name = "SECS")]
        wait: u64,
    },
}

#[derive(Subcommand, Debug)]
pub enum ApiKeyCommand {
    /// Create an API key with a fixed set of scopes; prints the key once.
    Create {
        /// The organization: its id (org_…) or its name; may be left out when there is only one.
        #[arg(long, env = "GATEHOUSE_ORG", value_name = "ORG")]
        org: Option<String>,
        /// A name that tells people what the key is for.
        #[arg(long)]
        name: String,
        /// The scopes the key carries, separated by spaces, e.g. "users:read products:read".
        #[arg(long)]
        scopes: String,
    },
    /// List an organization's API keys (never the keys themselves), revoked ones too.
    List {
        /// The organization: its id (org_…) or its name; may be left out when there is only one.
        #[arg(long, env = "GATEHOUSE_ORG", value_name = "ORG")]
        org: Option<String>,
    },
    /// Revoke an API key: it stops working on the next request.
    Revoke {
        /// The key's id (key_…, see `gatehouse apikey list`), not the key itself.
        #[arg(value_name = "KEY")]
        key_id: String,
    },
    /// Show one API key (never the key itself): its scopes, owner, expiry, last use.
    Show {
        /// The key's id (key_…, see `gatehouse apikey list`).
        #[arg(value_name = "KEY")]
        key_id: String,
    },
}

/// No `Debug`: it holds the SMTP URL, whose password must not reach a log.
#[derive(Args, Default, Clone)]
pub struct ServeArgs {
    /// The public address clients use, for `iss`, links and redirects [default: https://localhost:<port of --https-addr>; required with --behind-proxy].
    #[arg(long, env = "GATEHOUSE_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// HTTPS listener [default: 127.0.0.1:8443].
    #[arg(long, env = "GATEHOUSE_HTTPS_ADDR")]
    pub https_addr: Option<SocketAddr>,
    /// Plain-HTTP listener: 301 to HTTPS, or the app itself with --behind-proxy [default: 127.0.0.1:8080].
    #[arg(long, env = "GATEHOUSE_HTTP_ADDR")]
    pub http_addr: Option<SocketAddr>,
    /// Address of the admin listener that serves /metrics [default: 127.0.0.1:9090].
    #[arg(long, env = "GATEHOUSE_ADMIN_ADDR")]
    pub admin_addr: Option<SocketAddr>,
    /// Serve plain HTTP only, behind a proxy that terminates TLS (needs --public-url).
    #[arg(long, env = "GATEHOUSE_BEHIND_PROXY")]
    pub behind_proxy: bool,
    /// PEM certificate chain [default: a self-signed certificate in the data directory].
    #[arg(long, env = "GATEHOUSE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key.
    #[arg(long, env = "GATEHOUSE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// SMTP server for e-mail (`smtp://user:pass@host:587` or `smtps://…`) [default: .eml files in <data_dir>/outbox].
    #[arg(long, env = "GATEHOUSE_SMTP_URL")]
    pub smtp_url: Option<String>,
    /// The sender of e-mails [default: Gatehouse <no-reply@HOST of public_url>].
    #[arg(long, env = "GATEHOUSE_MAIL_FROM")]
    pub mail_from: Option<String>,
    /// Browser origins (https://app.example.com) allowed to call the API from a web page, comma-separated [default: none].
    #[arg(long, env = "GATEHOUSE_CORS_ORIGINS", value_delimiter = ',')]
    pub cors_origins: Vec<String>,
    /// IP addresses of proxies whose X-Forwarded-For header is believed for the client's address, comma-separated [default: none].
    #[arg(long, env = "GATEHOUSE_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// Seconds during which presenting the same refresh token again returns the same new tokens, for clients that retry (0: off) [default: 10].
    #[arg(long, env = "GATEHOUSE_REFRESH_GRACE_SECS")]
    pub refresh_grace_secs: Option<i64>,
    /// Days after which a sign-in's refresh tokens stop working however often they are used [default: 90].
    #[arg(long, env = "GATEHOUSE_REFRESH_MAX_DAYS")]
    pub refresh_max_days: Option<i64>,
    /// Seconds a response to a request with an Idempotency-Key header is kept and replayed to retries [default: 86400].
    #[arg(long, env = "GATEHOUSE_IDEMPOTENCY_RETENTION_SECS", value_parser = clap::value_parser!(i64).range(1..))]
    pub idempotency_retention_secs: Option<i64>,
    /// How long events are kept for GET /v1/events, with a unit: s, m, h or d (7d to 90d) [default: 30d].
    #[arg(long, env = "GATEHOUSE_EVENT_RETENTION")]
    pub event_retention: Option<String>,
    /// How long a browser sign-in lasts without browser use, with a unit: s, m, h or d (5m to 90d) [default: 14d].
    #[arg(long, env = "GATEHOUSE_SESSION_IDLE")]
    pub session_idle: Option<String>,
    /// How long a browser sign-in lasts at most, with a unit: s, m, h or d (1h to 400d, not below the idle time) [default: 90d].
    #[arg(long, env = "GATEHOUSE_SESSION_MAX")]
    pub session_max: Option<String>,
    /// The length of one day of the second-factor policy's enrollment_grace_days, a duration; honoured only with --test-settings (for tests of the deadline) [default: 1d].
    #[arg(long, env = "GATEHOUSE_MFA_GRACE_DAY")]
    pub mfa_grace_day: Option<String>,
    /// How long the audit log keeps its admin entries, with a unit: s, m, h or d (30d to 3650d) [default: 400d].
    #[arg(long, env = "GATEHOUSE_AUDIT_RETENTION_ADMIN")]
    pub audit_retention_admin: Option<String>,
    /// How long the audit log keeps its security entries, with a unit: s, m, h or d (30d to 3650d) [default: 90d].
    #[arg(long, env = "GATEHOUSE_AUDIT_RETENTION_SECURITY")]
    pub audit_retention_security: Option<String>,
    /// How often each audit chain with new entries gets a signed checkpoint, aligned to 00:00 UTC, with a unit (1h to 7d) [default: 24h].
    #[arg(long, env = "GATEHOUSE_AUDIT_CHECKPOINT_EVERY")]
    pub audit_checkpoint_every: Option<String>,
    /// The period of the audit log's "first use per period" of machine credentials and introspection, aligned to 00:00 UTC, with a unit (1h to 7d) [default: 1d].
    #[arg(long, env = "GATEHOUSE_AUDIT_PERIOD")]
    pub audit_period: Option<String>,
    /// Address ranges webhooks may be delivered to despite the address rules, and over plain http, comma-separated (e.g. 127.0.0.0/8 for tests) [default: none].
    #[arg(long, env = "GATEHOUSE_WEBHOOK_ALLOW_CIDRS")]
    pub webhook_allow_cidrs: Option<String>,
    /// The waits before each retry of a webhook delivery, comma-separated durations (s, m, h or d; each 1s to 7d) [default: 5s,5m,30m,2h,5h,10h,14h,20h,24h].
    #[arg(long, env = "GATEHOUSE_WEBHOOK_RETRY_SCHEDULE")]
    pub webhook_retry_schedule: Option<String>,
    /// How long one webhook attempt may take in all, a duration (1s to 60s) [default: 15s].
    #[arg(long, env = "GATEHOUSE_WEBHOOK_TIMEOUT")]
    pub webhook_timeout: Option<String>,
    /// How long connecting to a webhook endpoint may take, a duration (1s to 30s) [default: 5s].
    #[arg(long, env = "GATEHOUSE_WEBHOOK_CONNECT_TIMEOUT")]
    pub webhook_connect_timeout: Option<String>,
    /// host:port of a DNS server that resolves webhook hosts instead of the system's; honoured only with --test-settings, in a build with the test-dns feature (for tests of the address rules).
    #[arg(long, env = "GATEHOUSE_WEBHOOK_DNS")]
    pub webhook_dns: Option<String>,
    /// How long a webhook endpoint may fail without a success before it is disabled, a duration (1d to 30d) [default: 5d].
    #[arg(long, env = "GATEHOUSE_WEBHOOK_DISABLE_AFTER")]
    pub webhook_disable_after: Option<String>,
    /// Webhook requests in flight per endpoint at most, over every node (1 to 100) [default: 10].
    #[arg(long, env = "GATEHOUSE_WEBHOOK_MAX_IN_FLIGHT", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub webhook_max_in_flight: Option<u32>,
    /// Lifts the minimums of the third round's durations so tests can use seconds; logs a warning at every start. Never in production.
    // D40 (continued): `GATEHOUSE_TEST_SETTINGS=1` (and `true`, `yes`, `on`).
    #[arg(long, env = "GATEHOUSE_TEST_SETTINGS", value_parser = clap::builder::BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true")]
    pub test_settings: bool,
    /// One log line per request at info (method, path without its query, status, duration, request id); `false` turns it off [default: true].
    #[arg(long, env = "GATEHOUSE_ACCESS_LOG", value_parser = clap::builder::BoolishValueParser::new(), value_name = "BOOL")]
    pub access_log: Option<bool>,
    /// Seconds a client has to send a complete request head after connecting or after the first byte of its next request; slower connections are closed [default: 10].
    #[arg(long, env = "GATEHOUSE_HEAD_TIMEOUT_SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub head_timeout_secs: Option<u64>,
    /// Seconds a kept-alive connection may stay without a request before it is closed [default: 60].
    #[arg(long, env = "GATEHOUSE_IDLE_TIMEOUT_SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_secs: Option<u64>,
    /// Staging: the daily time (UTC, HH:MM) at which the sample data is restored [default: 02:00].
    #[arg(long, env = "GATEHOUSE_STAGING_RESET_AT", value_parser = parse_hhmm)]
    pub staging_reset_at: Option<(u8, u8)>,
}

/// `HH:MM` (24-hour clock).
pub fn parse_hhmm(s: &str) -> Result<(u8, u8), String> {
    let err = || format!("{s:?} is not a time of day as HH:MM");
    let (h, m) = s.trim().split_once(':').ok_or_else(err)?;
    let (h, m): (u8, u8) = (h.parse().map_err(|_| err())?, m.parse().map_err(|_| err())?);
    if h > 23 || m > 59 || s.trim().len() != 5 {
        return Err(err());
    }
    Ok((h, m))
}

#[derive(Subcommand, Debug)]
pub enum OrgCommand {
    /// Create an organization.
    Create {
        /// The organization's name.
        #[arg(long)]
        name: String,
        /// The plan, which sets the request rate limits: free (default), pro or enterprise.
        #[arg(long)]
        plan: Option<String>,
        /// Enterprise plan only: requests allowed per minute (implies --plan enterprise).
        #[arg(long, value_name = "N")]
        per_minute: Option<u32>,
        /// Enterprise plan only: requests allowed per second (implies --plan enterprise).
        #[arg(long, value_name = "N")]
        per_second: Option<u32>,
    },
    /// List every organization.
    List,
    /// Show one organization: its plan, rate limits and settings.
    Show {
        /// The organization: its id (org_…, see `gatehouse org list`) or its name.
        #[arg(value_name = "ORG")]
        org: String,
    },
    /// Change an organization's settings.
    Set {
        /// The organization: its id (org_…) or its name.
        #[arg(value_name = "ORG")]
        org: String,
        /// Turn the preview of the next API version (/v2/) on or off for this organization.
        #[arg(long, value_parser = ["on", "off"])]
        v2_preview: Option<String>,
    },
    /// Rename an organization: the sign-in pages, e-mails and the dashboard
    /// of every running server show the new name from their next request.
    Rename {
        /// The organization: its id (org_…) or its current name.
        #[arg(value_name = "ORG")]
        org: String,
        /// The new name.
        #[arg(long)]
        name: String,
    },
    /// Change an organization's plan, which sets its request rate limits;
    /// every running server applies them from its next request.
    Plan {
        /// The organization: its id (org_…) or its name.
        #[arg(value_name = "ORG")]
        org: String,
        /// free, pro or enterprise (implied by --per-minute or --per-second).
        #[arg(long)]
        plan: Option<String>,
        /// Enterprise plan only: requests allowed per minute.
        #[arg(long, value_name = "N")]
        per_minute: Option<u32>,
        /// Enterprise plan only: requests allowed per second.
        #[arg(long, value_name = "N")]
        per_second: Option<u32>,
    },
}

#[derive(Subcommand, Debug)]
pub enum ClientCommand {
    /// Register a client application; prints its client_id and, once, its secret.
    Create {
        /// The organization: its id (org_…) or its name; may be left out when there is only one.
        #[arg(long, env = "GATEHOUSE_ORG", value_name = "ORG")]
        org: Option<String>,
        /// The application's name, shown to people on the consent page.
        #[arg(long)]
        name: String,
        /// The scopes the application may be granted, separated by spaces,
        /// e.g. "openid profile users:read". Listing admin is not enough to
        /// get it: see `gatehouse client approve-admin`.
        #[arg(long)]
        scopes: String,
        /// Where people are sent back after signing in: https://…, or
        /// http://127.0.0.1 / http://[::1] / http://localhost for apps on the
        /// user's own machine; no fragment. Repeat for several.
        #[arg(long = "redirect-uri", value_name = "URI")]
        redirect_uris: Vec<String>,
        /// Where the application may send people after they sign out; matched
        /// exactly, same rules as --redirect-uri. Repeat for several.
        #[arg(long = "post-logout-redirect-uri", value_name = "URI")]
        post_logout_redirect_uris: Vec<String>,
        /// A public application (a browser or mobile app that cannot keep a
        /// secret): it gets no secret and signs people in only with the
        /// authorization-code flow and PKCE; needs --redirect-uri.
        #[arg(long)]
        public: bool,
        /// The user who owns the application (usr_…).
        #[arg(long, value_name = "USR")]
        owner: Option<String>,
    },
    /// List an organization's client applications.
    List {
        /// The organization: its id (org_…) or its name; may be left out when there is only one.
        #[arg(long, env = "GATEHOUSE_ORG", value_name = "ORG")]
        org: Option<String>,
    },
    /// Show one client application (never its secret).
    Show {
        /// The application's client_id (app_…).
        #[arg(value_name = "APP")]
        client_id: String,
    },
    /// Change a client application; what you leave out stays as it is.
    /// Removing a scope ends at once the application's access and refresh
    /// tokens that carry it (those people sign in again; its other tokens
    /// keep working), and withdraws the scope from the consents people gave.
    #[command(group(
        clap::ArgGroup::new("change")
            .required(true)
            .multiple(true)
            .args(["name", "redirect_uris", "post_logout_redirect_uris", "scopes", "owner"])
    ))]
    Update {
        /// The application's client_id (app_…).
        #[arg(value_name = "APP")]
        client_id: String,
        /// A new name.
        #[arg(long)]
        name: Option<String>,
        /// Replaces all redirect URIs (same rules as for `client create`).
        /// Repeat for several.
        #[arg(long = "redirect-uri", value_name = "URI")]
        redirect_uris: Vec<String>,
        /// Replaces all post-logout redirect URIs. Repeat for several.
        #[arg(long = "post-logout-redirect-uri", value_name = "URI")]
        post_logout_redirect_uris: Vec<String>,
        /// Replaces the scopes, separated by spaces. Adding admin here does
        /// not approve it (`gatehouse client approve-admin` does).
        #[arg(long)]
        scopes: Option<String>,
        /// Moves the application to another active user of its organization
        /// (usr_…). Moved away from a deactivated or deleted owner, a
        /// confidential application refuses its secret until
        /// `gatehouse client rotate-secret` (with no grace) issues a new one.
        #[arg(long, value_name = "USR")]
        owner: Option<String>,
    },
    /// Delete a client application and everything it holds: its tokens,
    /// sign-ins and consents stop working at once.
    Delete {
        /// The application's client_id (app_…).
        #[arg(value_name = "APP")]
        client_id: String,
    },
    /// Allow the admin scope for a client application (an operator's decision).
    ApproveAdmin {
        /// The application's client_id (app_…).
        #[arg(value_name = "APP")]
        client_id: String,
    },
    /// Issue a new client secret (shown once); the old one keeps working for
    /// --grace seconds so running copies of the application can switch.
    RotateSecret {
        /// The application's client_id (app_…).
        #[arg(value_name = "APP")]
        client_id: String,
        /// Seconds the old secret keeps working (0: it stops at once).
        #[arg(long, default_value_t = 0, value_name = "SECS")]
        grace: u64,
    },
}

#[derive(Subcommand, Debug)]
pub enum UserCommand {
    /// Create an active user with a password, without the invitation e-mail
    /// (for operators and tests).
    Create {
        /// The organization: its id (org_…) or its name; may be left out when there is only one.
        #[arg(long, env = "GATEHOUSE_ORG", value_name = "ORG")]
        org: Option<String>,
        /// The user's e-mail address, unique within the organization.
        #[arg(long)]
        email: String,
        /// The user's name.
        #[arg(long)]
        name: String,
        /// admin, editor or viewer.
        #[arg(long)]
        role: String,
        /// Read the password (at least 12 characters) from the first line of
        /// standard input, so it appears neither in the shell history nor in `ps`;
        /// at a terminal, asks for it twice without showing it.
        #[arg(long, required = true)]
        password_stdin: bool,
    },
    /// List an organization's users, optionally filtered.
    List {
        /// The organization: its id (org_…) or its name; may be left out when there is only one.
        #[arg(long, env = "GATEHOUSE_ORG", value_name = "ORG")]
        org: Option<String>,
        /// Only users with this role: admin, editor or viewer.
        #[arg(long)]
        role: Option<String>,
        /// Only users in this state: active, inactive (deactivated) or pending_invite (invited, not yet accepted).
        #[arg(long)]
        status: Option<String>,
        /// Only users whose name or e-mail contains this text (any case).
        #[arg(long, value_name = "TEXT")]
        q: Option<String>,
        /// Show at most N users (1 to 100) [default: all of them].
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
        limit: Option<u32>,
        /// Skip the first N matching users.
        #[arg(long, value_name = "N", default_value_t = 0)]
        offset: u64,
    },
    /// Show one user.
    Show {
        /// The user's id (usr_…).
        #[arg(value_name = "USR")]
        user_id: String,
    },
    /// Remove every second factor and recovery code of a user, end their
    /// sessions and revoke their tokens (what DELETE /v1/users/{id}/mfa does); they are e-mailed.
    ResetMfa {
        /// The user's id (usr_…).
        #[arg(value_name = "USR")]
        user_id: String,
    },
    /// Change a user's name or role (what PATCH /v1/users/{id} does); what you
    /// leave out stays. A demotion narrows the user's tokens at once; the
    /// last active admin cannot be demoted.
    #[command(group(
        clap::ArgGroup::new("change")
            .required(true)
            .multiple(true)
            .args(["name", "role"])
    ))]
    Update {
        /// The user's id (usr_…).
        #[arg(value_name = "USR")]
        user_id: String,
        /// A new name.
        #[arg(long)]
        name: Option<String>,
        /// admin, editor or viewer.
        #[arg(long)]
        role: Option<String>,
    },
    /// Deactivate a user: they can no longer sign in, their sessions end, their
    /// tokens are revoked and the applications they own are suspended.
    Deactivate {
        /// The user's id (usr_…).
        #[arg(value_name = "USR")]
        user_id: String,
    },
    /// Reactivate a deactivated user: they can sign in again, and the
    /// applications they own are no longer suspended (their revoked tokens
    /// and keys stay revoked).
    Activate {
        /// The user's id (usr_…).
        #[arg(value_name = "USR")]
        user_id: String,
    },
    /// Delete a user and end everything they hold; the applications they own
    /// move to another active user with --transfer-to (refused while they own
    /// some and it is left out).
    Delete {
        /// The user's id (usr_…).
        #[arg(value_name = "USR")]
        user_id: String,
        /// The active user of the same organization who gets their applications (usr_…).
        #[arg(long, value_name = "USR")]
        transfer_to: Option<String>,
    },
    /// E-mail an active user a link to choose a new password, as the sign-in
    /// page's "Forgot your password?" does (at most one per 5 minutes).
    ResetPassword {
        /// The user's id (usr_…).
        #[arg(value_name = "USR")]
        user_id: String,
    },
}

/// The TOML file: every key optional.
/// No `Debug`: it holds URLs with passwords.
#[derive(Deserialize, Default)]
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
    pub mail_from: Option<String>,
    pub cors_origins: Option<Vec<String>>,
    pub refresh_grace_secs: Option<i64>,
    pub refresh_max_days: Option<i64>,
    pub idempotency_retention_secs: Option<i64>,
    pub trusted_proxies: Option<Vec<std::net::IpAddr>>,
    pub env: Option<Env>,
    pub staging_reset_at: Option<String>,
    pub head_timeout_secs: Option<u64>,
    pub idle_timeout_secs: Option<u64>,
    pub event_retention: Option<String>,
    pub session_idle: Option<String>,
    pub session_max: Option<String>,
    pub mfa_grace_day: Option<String>,
    pub audit_retention_admin: Option<String>,
    pub audit_retention_security: Option<String>,
    pub audit_checkpoint_every: Option<String>,
    pub audit_period: Option<String>,
    pub webhook_allow_cidrs: Option<String>,
    pub webhook_retry_schedule: Option<String>,
    pub webhook_timeout: Option<String>,
    pub webhook_connect_timeout: Option<String>,
    pub webhook_max_in_flight: Option<u32>,
    pub webhook_disable_after: Option<String>,
    pub webhook_dns: Option<String>,
    pub test_settings: Option<bool>,
    pub access_log: Option<bool>,
}

const DAY: i64 = 86_400;

/// D40 (continued): a duration setting, with a unit (`30s`, `5m`, `2h`,
/// `30d`), in seconds. A value outside `(min, max)` stops the start with a
/// clear error; `--test-settings` lifts the minimum (never the maximum), so
/// tests can use seconds.
/// D55 (D40 continued): `GATEHOUSE_WEBHOOK_RETRY_SCHEDULE`, the waits
/// before the retries, each a duration as [`duration_setting`] reads it
/// (1 s to 7 d; `--test-settings` lifts the minimum).
pub fn retry_schedule(
    raw: &str,
    test: bool,
) -> anyhow::Result<gatehouse_domain::webhook::RetrySchedule> {
    const NAME: &str = "GATEHOUSE_WEBHOOK_RETRY_SCHEDULE";
    for wait in raw.split(',') {
        duration_setting(NAME, wait, (1, 7 * DAY), test)?;
    }
    gatehouse_domain::webhook::RetrySchedule::parse(raw).map_err(|e| anyhow::anyhow!("{NAME}: {e}"))
}

pub fn duration_setting(
    name: &str,
    raw: &str,
    (min, max): (i64, i64),
    test: bool,
) -> anyhow::Result<i64> {
    let raw = raw.trim();
    let split = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let (n, unit) = raw.split_at(split);
    let per = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => DAY,
        _ => anyhow::bail!(
            "{name}: {raw:?} is not a duration (a whole number with s, m, h or d, e.g. 30d)"
        ),
    };
    let secs = n
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(per))
        .filter(|s| *s > 0)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{name}: {raw:?} is not a duration (a whole number with s, m, h or d, e.g. 30d)"
            )
        })?;
    let show = |s: i64| {
        if s % DAY == 0 {
            format!("{}d", s / DAY)
        } else {
            format!("{s}s")
        }
    };
    if secs > max || (secs < min && !test) {
        anyhow::bail!(
            "{name}: {raw} is outside {} to {} (--test-settings lifts the minimum, for tests only)",
            show(min),
            show(max)
        );
    }
    Ok(secs)
}

/// D1 (revised): `https://localhost:<port>` of the HTTPS listener.
pub fn default_public_url(https_addr: SocketAddr) -> String {
    match https_addr.port() {
        443 => "https://localhost".to_owned(),
        port => format!("https://localhost:{port}"),
    }
}

/// Settings after merging flags, environment, file and defaults. Its
/// `Debug` hides the master key and the passwords of the database and SMTP
/// URLs.
#[derive(Clone)]
pub struct Settings {
    pub data_dir: PathBuf,
    pub database_url: String,
    pub public_url: String,
    pub https_addr: SocketAddr,
    pub http_addr: SocketAddr,
    pub admin_addr: SocketAddr,
    pub behind_proxy: bool,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// From `GATEHOUSE_MASTER_KEY` only (never a flag: flags show in `ps`).
    pub master_key: Option<String>,
    pub smtp_url: Option<String>,
    pub mail_from: String,
    pub cors_origins: Vec<String>,
    pub refresh_grace_secs: i64,
    pub refresh_max_days: i64,
    /// D50: how long a kept idempotent response lives.
    pub idempotency_retention_secs: i64,
    /// D54 (D40 continued): how long events are kept.
    pub event_retention_secs: i64,
    /// D57 (D40 continued): `GATEHOUSE_SESSION_IDLE` and `_MAX`.
    pub session_limits: gatehouse_domain::session::SessionLimits,
    /// D56 (D40 continued): `GATEHOUSE_MFA_GRACE_DAY`, in seconds.
    pub mfa_grace_day_secs: i64,
    /// D58 (D40 continued): `GATEHOUSE_AUDIT_RETENTION_*`,
    /// `GATEHOUSE_AUDIT_CHECKPOINT_EVERY`, `GATEHOUSE_AUDIT_PERIOD`.
    pub audit: gatehouse_app::audit::AuditSettings,
    /// D55: `GATEHOUSE_WEBHOOK_ALLOW_CIDRS`.
    pub webhook_allow: gatehouse_domain::webhook::AllowList,
    /// D55: `GATEHOUSE_WEBHOOK_RETRY_SCHEDULE`.
    pub webhook_schedule: gatehouse_domain::webhook::RetrySchedule,
    /// D55: `GATEHOUSE_WEBHOOK_TIMEOUT`.
    pub webhook_timeout: std::time::Duration,
    /// D55: `GATEHOUSE_WEBHOOK_CONNECT_TIMEOUT`.
    pub webhook_connect_timeout: std::time::Duration,
    /// D55: `GATEHOUSE_WEBHOOK_MAX_IN_FLIGHT`.
    pub webhook_max_in_flight: u32,
    /// D55: `GATEHOUSE_WEBHOOK_DISABLE_AFTER`.
    pub webhook_disable_after: std::time::Duration,
    /// D55: `GATEHOUSE_WEBHOOK_DNS` (only with `--test-settings`).
    pub webhook_dns: Option<std::net::SocketAddr>,
    /// Trust anchors for webhook receivers beside the system's (PEM); set
    /// by tests for their own HTTPS receivers, never by configuration.
    pub webhook_extra_roots_pem: Vec<Vec<u8>>,
    /// How long webhook attempts in flight may finish at shutdown (D43
    /// continued): within the 30 s drain; tests shorten it, never
    /// configuration.
    pub webhook_drain: std::time::Duration,
    /// D40 (continued): `--test-settings`, the durations' minimums lifted.
    pub test_settings: bool,
    /// Issue 32: one `info` line per request (docs/deployment.md, "Logs").
    pub access_log: bool,
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// D33: production or staging.
    pub env: Env,
    /// D33: the daily reset time of staging (UTC hour, minute).
    pub staging_reset_at: (u8, u8),
    /// D34: the in-memory mock (`gatehouse mock`).
    pub mock: bool,
    /// D45: time for a complete request head.
    pub head_timeout: std::time::Duration,
    /// D45: time a kept-alive connection may stay idle.
    pub idle_timeout: std::time::Duration,
    /// D19: a pause before `/password/forgot` looks the address up, for
    /// tests that show the answer does not wait for it. Not configurable
    /// outside tests.
    pub forgot_lookup_delay: std::time::Duration,
}

/// A URL with its password (and any `password=` parameter) replaced by
/// `***`, for logs and `Debug`.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let rest = &out[scheme_end + 3..];
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@')
            && let Some(colon) = rest[..at].find(':')
        {
            let (start, end) = (scheme_end + 3 + colon + 1, scheme_end + 3 + at);
            out.replace_range(start..end, "***");
        }
    }
    if let Some(q) = out.find('?') {
        let (head, query) = out.split_at(q + 1);
        let redacted: Vec<String> = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => kv.to_owned(),
            })
            .collect();
        out = format!("{head}{}", redacted.join("&"));
    }
    out
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("data_dir", &self.data_dir)
            .field("database_url", &redact_url(&self.database_url))
            .field("public_url", &self.public_url)
            .field("https_addr", &self.https_addr)
            .field("http_addr", &self.http_addr)
            .field("admin_addr", &self.admin_addr)
            .field("behind_proxy", &self.behind_proxy)
            .field("tls_cert", &self.tls_cert)
            .field("tls_key", &self.tls_key)
            .field("master_key", &self.master_key.as_ref().map(|_| "***"))
            .field("smtp_url", &self.smtp_url.as_deref().map(redact_url))
            .field("mail_from", &self.mail_from)
            .field("cors_origins", &self.cors_origins)
            .field("refresh_grace_secs", &self.refresh_grace_secs)
            .field("refresh_max_days", &self.refresh_max_days)
            .field(
                "idempotency_retention_secs",
                &self.idempotency_retention_secs,
            )
            .field("event_retention_secs", &self.event_retention_secs)
            .field("audit", &self.audit)
            .field("test_settings", &self.test_settings)
            .field("access_log", &self.access_log)
            .field("trusted_proxies", &self.trusted_proxies)
            .field("env", &self.env)
            .field("staging_reset_at", &self.staging_reset_at)
            .field("mock", &self.mock)
            .field("head_timeout", &self.head_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .finish_non_exhaustive()
    }
}

impl Settings {
    /// Defaults for a data directory (used by tests, which then set addresses).
    pub fn with_data_dir(data_dir: PathBuf) -> Self {
        let worker = gatehouse_app::deliveries::DeliverySettings::default();
        Self {
            database_url: format!("sqlite://{}", data_dir.join("gatehouse.db").display()),
            data_dir,
            public_url: "https://localhost:8443".into(),
            https_addr: "127.0.0.1:8443".parse().unwrap(),
            http_addr: "127.0.0.1:8080".parse().unwrap(),
            admin_addr: "127.0.0.1:9090".parse().unwrap(),
            behind_proxy: false,
            tls_cert: None,
            tls_key: None,
            master_key: None,
            smtp_url: None,
            mail_from: "Gatehouse <no-reply@localhost>".into(),
            cors_origins: Vec::new(),
            refresh_grace_secs: 10,
            refresh_max_days: 90,
            idempotency_retention_secs: 86_400,
            event_retention_secs: 30 * DAY,
            session_limits: Default::default(),
            mfa_grace_day_secs: gatehouse_domain::mfa::GRACE_DAY_SECS,
            audit: Default::default(),
            webhook_allow: Default::default(),
            webhook_schedule: Default::default(),
            // The worker's defaults, written once (gatehouse-app).
            webhook_timeout: worker.timeout,
            webhook_connect_timeout: std::time::Duration::from_secs(5),
            webhook_max_in_flight: worker.max_in_flight,
            webhook_disable_after: worker.disable_after,
            webhook_dns: None,
            webhook_extra_roots_pem: Vec::new(),
            webhook_drain: worker.drain,
            test_settings: false,
            access_log: true,
            trusted_proxies: Vec::new(),
            env: Env::Production,
            staging_reset_at: (2, 0),
            mock: false,
            head_timeout: std::time::Duration::from_secs(10),
            idle_timeout: std::time::Duration::from_secs(60),
            forgot_lookup_delay: std::time::Duration::ZERO,
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
        let env = if matches!(cli.command, Command::Staging(_)) {
            Env::Staging
        } else {
            cli.env.or(file.env).unwrap_or_default()
        };
        // D33: staging keeps its own database, keys and certificate.
        let data_dir = match env {
            Env::Production => data_dir,
            Env::Staging => data_dir.join("staging"),
        };
        let mut s = Self::with_data_dir(data_dir);
        s.env = env;
        s.staging_reset_at = match (serve.staging_reset_at, file.staging_reset_at.as_deref()) {
            (Some(t), _) => t,
            (None, Some(t)) => {
                parse_hhmm(t).map_err(|e| anyhow::anyhow!("staging_reset_at: {e}"))?
            }
            (None, None) => (2, 0),
        };
        if let Some(u) = cli.database_url.clone().or(file.database_url) {
            s.database_url = u;
        }
        if let Some(a) = serve.https_addr.or(file.https_addr) {
            s.https_addr = a;
        }
        s.behind_proxy = serve.behind_proxy || file.behind_proxy.unwrap_or(false);
        // Operator commands take the server's public URL from the
        // environment too (their flags are not `serve`'s): the links their
        // e-mails carry lead to it (issue 32, `user reset-password`).
        let env_url = || {
            std::env::var("GATEHOUSE_PUBLIC_URL")
                .ok()
                .filter(|u| !u.is_empty())
        };
        match serve
            .public_url
            .clone()
            .or_else(env_url)
            .or(file.public_url)
        {
            Some(u) => s.public_url = u.trim_end_matches('/').to_owned(),
            // D1 (revised): behind a proxy only the operator knows the
            // address clients use; guessing it would publish a wrong issuer.
            None if s.behind_proxy && matches!(cli.command, Command::Serve(_)) => {
                anyhow::bail!(
                    "--behind-proxy needs --public-url (or GATEHOUSE_PUBLIC_URL): the https:// address clients reach the proxy at, used as the token issuer and in links"
                )
            }
            // D1 (revised): the issuer follows the HTTPS listener's port.
            None => s.public_url = default_public_url(s.https_addr),
        }
        if let Some(a) = serve.http_addr.or(file.http_addr) {
            s.http_addr = a;
        }
        if let Some(a) = serve.admin_addr.or(file.admin_addr) {
            s.admin_addr = a;
        }
        s.tls_cert = serve.tls_cert.clone().or(file.tls_cert);
        s.tls_key = serve.tls_key.clone().or(file.tls_key);
        if s.tls_cert.is_some() != s.tls_key.is_some() {
            anyhow::bail!("tls_cert and tls_key go together");
        }
        s.master_key = std::env::var("GATEHOUSE_MASTER_KEY").ok();
        s.smtp_url = serve.smtp_url.clone().or(file.smtp_url);
        let host = s
            .public_url
            .split("://")
            .nth(1)
            .unwrap_or("localhost")
            .split(['/', ':'])
            .next()
            .unwrap_or("localhost")
            .to_owned();
        s.mail_from = serve
            .mail_from
            .clone()
            .or(file.mail_from)
            .unwrap_or_else(|| format!("Gatehouse <no-reply@{host}>"));
        s.cors_origins = if serve.cors_origins.is_empty() {
            file.cors_origins.unwrap_or_default()
        } else {
            serve.cors_origins.clone()
        };
        s.cors_origins.retain(|o| !o.trim().is_empty());
        s.refresh_grace_secs = serve
            .refresh_grace_secs
            .or(file.refresh_grace_secs)
            .unwrap_or(10)
            .max(0);
        s.trusted_proxies = if serve.trusted_proxies.is_empty() {
            file.trusted_proxies.unwrap_or_default()
        } else {
            serve.trusted_proxies.clone()
        };
        s.refresh_max_days = serve
            .refresh_max_days
            .or(file.refresh_max_days)
            .unwrap_or(90)
            .max(1);
        s.idempotency_retention_secs = serve
            .idempotency_retention_secs
            .or(file.idempotency_retention_secs)
            .unwrap_or(86_400)
            .max(1);
        s.test_settings = serve.test_settings || file.test_settings.unwrap_or(false);
        s.access_log = serve.access_log.or(file.access_log).unwrap_or(true);
        if let Some(raw) = serve
            .event_retention
            .as_deref()
            .or(file.event_retention.as_deref())
        {
            s.event_retention_secs = duration_setting(
                "GATEHOUSE_EVENT_RETENTION",
                raw,
                (7 * DAY, 90 * DAY),
                s.test_settings,
            )?;
        }
        if let Some(raw) = serve
            .session_idle
            .as_deref()
            .or(file.session_idle.as_deref())
        {
            s.session_limits.idle_secs = duration_setting(
                "GATEHOUSE_SESSION_IDLE",
                raw,
                (300, 90 * DAY),
                s.test_settings,
            )?;
        }
        if let Some(raw) = serve.session_max.as_deref().or(file.session_max.as_deref()) {
            s.session_limits.max_secs = duration_setting(
                "GATEHOUSE_SESSION_MAX",
                raw,
                (3600, 400 * DAY),
                s.test_settings,
            )?;
        }
        // D57: a sign-in cannot outlast its own end.
        if s.session_limits.idle_secs > s.session_limits.max_secs {
            anyhow::bail!(
                "GATEHOUSE_SESSION_IDLE ({}s) is longer than GATEHOUSE_SESSION_MAX ({}s)",
                s.session_limits.idle_secs,
                s.session_limits.max_secs
            );
        }
        if let Some(raw) = serve
            .mfa_grace_day
            .as_deref()
            .or(file.mfa_grace_day.as_deref())
        {
            // D40 (continued): a test's short day, never production's.
            if !s.test_settings {
                anyhow::bail!(
                    "GATEHOUSE_MFA_GRACE_DAY is honoured only with --test-settings (it shortens the second-factor policy's grace days for tests)"
                );
            }
            s.mfa_grace_day_secs =
                duration_setting("GATEHOUSE_MFA_GRACE_DAY", raw, (1, DAY), true)?;
        }
        // D58 (D40 continued): the audit log's durations.
        let audit_durations = [
            (
                "GATEHOUSE_AUDIT_RETENTION_ADMIN",
                serve
                    .audit_retention_admin
                    .as_deref()
                    .or(file.audit_retention_admin.as_deref()),
                (30 * DAY, 3_650 * DAY),
                &mut s.audit.retention_admin_secs,
            ),
            (
                "GATEHOUSE_AUDIT_RETENTION_SECURITY",
                serve
                    .audit_retention_security
                    .as_deref()
                    .or(file.audit_retention_security.as_deref()),
                (30 * DAY, 3_650 * DAY),
                &mut s.audit.retention_security_secs,
            ),
            (
                "GATEHOUSE_AUDIT_CHECKPOINT_EVERY",
                serve
                    .audit_checkpoint_every
                    .as_deref()
                    .or(file.audit_checkpoint_every.as_deref()),
                (3_600, 7 * DAY),
                &mut s.audit.checkpoint_every_secs,
            ),
            (
                "GATEHOUSE_AUDIT_PERIOD",
                serve
                    .audit_period
                    .as_deref()
                    .or(file.audit_period.as_deref()),
                (3_600, 7 * DAY),
                &mut s.audit.period_secs,
            ),
        ];
        let test = s.test_settings;
        for (name, raw, range, slot) in audit_durations {
            if let Some(raw) = raw {
                *slot = duration_setting(name, raw, range, test)?;
            }
        }
        if let Some(raw) = serve
            .webhook_allow_cidrs
            .as_deref()
            .or(file.webhook_allow_cidrs.as_deref())
        {
            s.webhook_allow = gatehouse_domain::webhook::AllowList::parse(raw)
                .map_err(|e| anyhow::anyhow!("GATEHOUSE_WEBHOOK_ALLOW_CIDRS: {e}"))?;
        }
        if let Some(raw) = serve
            .webhook_retry_schedule
            .as_deref()
            .or(file.webhook_retry_schedule.as_deref())
        {
            s.webhook_schedule = retry_schedule(raw, s.test_settings)?;
        }
        let secs = |name: &str, raw: &str, range| -> anyhow::Result<std::time::Duration> {
            let n = duration_setting(name, raw, range, s.test_settings)?;
            Ok(std::time::Duration::from_secs(n.unsigned_abs()))
        };
        if let Some(raw) = serve
            .webhook_timeout
            .as_deref()
            .or(file.webhook_timeout.as_deref())
        {
            s.webhook_timeout = secs("GATEHOUSE_WEBHOOK_TIMEOUT", raw, (1, 60))?;
        }
        if let Some(raw) = serve
            .webhook_connect_timeout
            .as_deref()
            .or(file.webhook_connect_timeout.as_deref())
        {
            s.webhook_connect_timeout = secs("GATEHOUSE_WEBHOOK_CONNECT_TIMEOUT", raw, (1, 30))?;
        }
        if let Some(raw) = serve
            .webhook_disable_after
            .as_deref()
            .or(file.webhook_disable_after.as_deref())
        {
            s.webhook_disable_after =
                secs("GATEHOUSE_WEBHOOK_DISABLE_AFTER", raw, (DAY, 30 * DAY))?;
        }
        if let Some(raw) = serve.webhook_dns.as_deref().or(file.webhook_dns.as_deref()) {
            if !s.test_settings {
                anyhow::bail!(
                    "GATEHOUSE_WEBHOOK_DNS is honoured only with --test-settings (it replaces the resolver webhooks are checked with; never in production)"
                );
            }
            if cfg!(not(feature = "test-dns")) {
                anyhow::bail!(
                    "GATEHOUSE_WEBHOOK_DNS needs a build with the test-dns feature (cargo build --features test-dns); the tests' build has it"
                );
            }
            s.webhook_dns = Some(raw.parse().map_err(|_| {
                anyhow::anyhow!(
                    "GATEHOUSE_WEBHOOK_DNS: {raw:?} is not host:port, e.g. 127.0.0.1:5353"
                )
            })?);
        }
        if let Some(n) = serve.webhook_max_in_flight.or(file.webhook_max_in_flight) {
            if !(1..=100).contains(&n) {
                anyhow::bail!("GATEHOUSE_WEBHOOK_MAX_IN_FLIGHT: {n} is outside 1 to 100");
            }
            s.webhook_max_in_flight = n;
        }
        if let Some(t) = serve.head_timeout_secs.or(file.head_timeout_secs) {
            s.head_timeout = std::time::Duration::from_secs(t.max(1));
        }
        if let Some(t) = serve.idle_timeout_secs.or(file.idle_timeout_secs) {
            s.idle_timeout = std::time::Duration::from_secs(t.max(1));
        }
        if !(s.public_url.starts_with("https://") || s.public_url.starts_with("http://")) {
            anyhow::bail!("public_url must start with https:// (got {})", s.public_url);
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_master_key_and_url_passwords() {
        let mut s = Settings::with_data_dir("/srv/gatehouse".into());
        s.database_url = "postgres://gatehouse:db-s3cret@db.internal:5432/gh?password=p2".into();
        s.smtp_url = Some("smtps://mailer:smtp-s3cret@mail.internal:465".into());
        s.master_key =
            Some("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff".into());
        let text = format!("{s:?}");
        for secret in ["db-s3cret", "p2", "smtp-s3cret", "00112233445566778899"] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
        assert!(
            text.contains("postgres://gatehouse:***@db.internal:5432/gh?password=***"),
            "{text}"
        );
        assert!(
            text.contains("smtps://mailer:***@mail.internal:465"),
            "{text}"
        );
        assert!(
            text.contains("/srv/gatehouse"),
            "the rest stays readable: {text}"
        );
    }

    #[test]
    fn d40_durations_take_a_unit_and_stay_in_their_range() {
        let range = (7 * DAY, 90 * DAY);
        let d =
            |raw: &str, test: bool| duration_setting("GATEHOUSE_EVENT_RETENTION", raw, range, test);
        assert_eq!(d("30d", false).unwrap(), 30 * DAY);
        assert_eq!(d("168h", false).unwrap(), 7 * DAY);
        assert_eq!(d("90d", false).unwrap(), 90 * DAY);
        for bad in ["6d", "91d", "30", "30 days", "d", "-5d", "0s"] {
            let e = d(bad, false).unwrap_err().to_string();
            assert!(e.starts_with("GATEHOUSE_EVENT_RETENTION: "), "{bad}: {e}");
        }
        // --test-settings lifts the minimum only.
        assert_eq!(d("5s", true).unwrap(), 5);
        assert!(d("91d", true).is_err());
        assert!(
            d("6d", false)
                .unwrap_err()
                .to_string()
                .contains("7d to 90d")
        );
    }

    #[test]
    fn urls_without_passwords_are_unchanged() {
        for url in [
            "sqlite:///data/gatehouse.db",
            "smtp://mail.internal:25",
            "postgres://gh@db/gh",
            "https://user@host/a?b=c",
        ] {
            assert_eq!(redact_url(url), url);
        }
    }
}
