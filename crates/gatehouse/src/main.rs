//! `gatehouse`: see `gatehouse --help` and the README.

use anyhow::Context;
use clap::Parser;
use gatehouse::config::{Cli, Command, ServeArgs, Settings};
use gatehouse::{commands, open_existing_store, open_store, run};
use tracing_subscriber::EnvFilter;

/// mimalloc: allocation is a tenth of the token endpoint's CPU with glibc's
/// allocator (measured with perf), noticeably less with this one. Built
/// without its transparent-huge-page advice (`no_thp`, Cargo.toml): each
/// fault in its heap then maps 4 KiB, not 2 MiB.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("GATEHOUSE_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal: a log file, a pipe
        // or a service manager's journal gets plain text (issue 32), as
        // does anyone who sets NO_COLOR (no-color.org).
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        )
        .init();
    // Usage errors (clap) exit with status 2 before anything runs.
    let cli = Cli::parse();
    let json = cli.json;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(dispatch(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // D47: with --json, one error object on stdout as well; exit 1.
            if json {
                gatehouse::out::print(&format!("{}\n", commands::error_json(&e)));
            }
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The application layer of an operator command, over the configured
/// storage, which must exist already (D47: only serve, migrate and mock
/// create a database).
async fn operator(settings: &Settings) -> anyhow::Result<gatehouse_app::App> {
    // The server's public URL: the links of the e-mails a command sends
    // (`user reset-password`, `user reset-mfa`) lead to it.
    Ok(gatehouse_app::App::operator(
        open_existing_store(settings).await?,
        std::sync::Arc::new(gatehouse_server::Published),
    )
    .with_public_url(&settings.public_url))
}

async fn dispatch(cli: Cli) -> anyhow::Result<()> {
    let serve_args = match &cli.command {
        Command::Serve(a) => a.clone(),
        _ => ServeArgs::default(),
    };
    let settings = Settings::resolve(&cli, &serve_args)
        .map_err(|e| commands::failure(commands::CONFIGURATION_ERROR, format!("{e:#}")))?;
    let json = cli.json;
    let out = match cli.command {
        Command::Openapi => {
            let doc = gatehouse_server::api::openapi::document(&settings.public_url);
            gatehouse::out::print(&format!("{}\n", serde_json::to_string_pretty(&doc)?));
            return Ok(());
        }
        Command::Serve(_) => return serve(settings, json).await,
        Command::Migrate => {
            open_store(&settings.database_url).await?;
            commands::Output::new(serde_json::json!({ "ok": true }))
        }
        Command::Org(cmd) => commands::org(&operator(&settings).await?, cmd, settings.env).await?,
        Command::Staging(cmd) => commands::staging(&operator(&settings).await?, cmd).await?,
        Command::Mock { addr } => return mock(settings, addr, json).await,
        Command::Client(cmd) => commands::client(&operator(&settings).await?, cmd).await?,
        Command::User(cmd) => commands::user(&operator(&settings).await?, cmd).await?,
        Command::Apikey(cmd) => {
            commands::apikey(&operator(&settings).await?, cmd, settings.env).await?
        }
        Command::Webhook(cmd) => commands::webhook(&operator(&settings).await?, cmd).await?,
        Command::Audit(cmd) => {
            let app = operator(&settings).await?;
            // Only a checkpoint signs: the master key opens the signing key.
            let master = match &cmd {
                gatehouse::config::AuditCommand::Checkpoint { .. } => Some(
                    gatehouse::load_master_key(settings.master_key.as_deref(), &settings.data_dir)?,
                ),
                gatehouse::config::AuditCommand::Verify { .. } => None,
            };
            commands::audit(&app, cmd, master).await?
        }
        Command::Keys(gatehouse::config::KeysCommand::List) => {
            let app = operator(&settings).await?;
            commands::keys_list(&app).await?
        }
        Command::Keys(cmd) => {
            let app = operator(&settings).await?;
            let master =
                gatehouse::load_master_key(settings.master_key.as_deref(), &settings.data_dir)?;
            commands::keys(&app, master, cmd).await?
        }
        Command::Token(cmd) => {
            commands::token(&run::token_authority(&settings).await?, cmd).await?
        }
        Command::MasterKey(cmd) => {
            let app = operator(&settings).await?;
            let current =
                gatehouse::existing_master_key(settings.master_key.as_deref(), &settings.data_dir)?;
            commands::master_key(&app, current, cmd).await?
        }
    };
    out.print(json);
    Ok(())
}

/// D34: the mock keeps its database on a memory file system (`/dev/shm`
/// when there is one) and removes it when it stops: nothing persists.
async fn mock(settings: Settings, addr: std::net::SocketAddr, json: bool) -> anyhow::Result<()> {
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::Builder::new()
            .prefix("gatehouse-mock-")
            .tempdir_in(shm)?
    } else {
        tempfile::Builder::new()
            .prefix("gatehouse-mock-")
            .tempdir()?
    };
    let settings = run::mock_settings(&settings, dir.path(), addr);
    let running = run::start(&settings).await?;
    let url = format!("http://{}", running.http_addr);
    // D53: the organization's id, printed with the client.
    let org = running
        .bootstrap
        .as_ref()
        .map(|c| c.org.clone())
        .context("the mock created its organization")?;
    let banner = if json {
        format!(
            "{}\n",
            serde_json::json!({
                "url": url,
                "org": org,
                "client_id": run::MOCK_CLIENT_ID,
                "client_secret": run::MOCK_CLIENT_SECRET,
                "redirect_uri": run::MOCK_REDIRECT_URI,
                "password": run::MOCK_PASSWORD,
                "totp_user": run::MOCK_TOTP_USER,
                "totp_secret": run::MOCK_TOTP_SECRET,
            })
        )
    } else {
        let codes = |c: &[u16]| c.iter().map(u16::to_string).collect::<Vec<_>>().join(", ");
        format!(
            "Gatehouse mock on {url} (data in memory, gone at exit)\n  org:           {org}\n  client_id:     {}\n  client_secret: {}\n  redirect_uri:  {} (any port)\n  every fixture user signs in with the password {}\n  {} also has an authenticator app (TOTP, SHA-1, 6 digits, 30 s) with the secret {}\n  every scope; send `Prefer: code=NNN` ({}) to get that error\n  on /oauth/token, /oauth/revoke and /oauth/introspect: `Prefer: code=NNN` ({}) or `Prefer: error=<code>`\n",
            run::MOCK_CLIENT_ID,
            run::MOCK_CLIENT_SECRET,
            run::MOCK_REDIRECT_URI,
            run::MOCK_PASSWORD,
            run::MOCK_TOTP_USER,
            run::MOCK_TOTP_SECRET,
            codes(gatehouse_server::mock::PREFERRED_CODES),
            codes(gatehouse_server::mock::OAUTH_PREFERRED_CODES),
        )
    };
    gatehouse::out::announce(&banner);
    shutdown_signal().await;
    running.shutdown().await;
    drop(dir);
    Ok(())
}

async fn serve(settings: Settings, json: bool) -> anyhow::Result<()> {
    // Each connection is a file descriptor: allow as many as the system
    // lets this process have (slow clients are closed by D45's deadlines).
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(n) => tracing::debug!(limit = n, "open-file limit"),
        Err(e) => tracing::warn!(error = %e, "could not raise the open-file limit"),
    }
    let running = run::start(&settings).await?;
    if let Some(creds) = &running.bootstrap {
        let path = settings.data_dir.join("bootstrap-credentials.json");
        let banner = if json {
            format!("{}\n", serde_json::to_string(creds)?)
        } else {
            format!(
                "First start: created organization {} and a client approved for every scope.\n  client_id:     {}\n  client_secret: {}\nThese are shown once; they are also in {} (mode 0600).\n",
                creds.org,
                creds.client_id,
                creds.client_secret,
                path.display()
            )
        };
        gatehouse::out::announce(&banner);
    }
    match running.https_addr {
        Some(a) => {
            tracing::info!(https = %a, http = %running.http_addr, public_url = %settings.public_url, "serving")
        }
        None => {
            tracing::info!(http = %running.http_addr, public_url = %settings.public_url, "serving behind a proxy")
        }
    }
    if !json {
        gatehouse::out::announce(&start_banner(&running, &settings).await);
    }
    shutdown_signal().await;
    tracing::info!("shutting down: finishing requests in flight");
    running.shutdown().await;
    tracing::info!("stopped");
    Ok(())
}

/// Issue 32: where to go next, once serving: the dashboard, the docs, the
/// metrics, and on a fresh install the command that makes the first admin
/// (the dashboard has nobody to sign in otherwise).
async fn start_banner(running: &run::Running, settings: &Settings) -> String {
    let url = &settings.public_url;
    let mut text = format!(
        "Gatehouse is serving {url}\n  dashboard: {url}/dashboard\n  docs:      {url}/docs\n  metrics:   http://{}/metrics\n",
        running.admin_addr
    );
    match running.state.app.awaiting_first_admin().await {
        Ok(Some(org)) => {
            // The same program and data as this server's.
            let program = std::env::args()
                .next()
                .unwrap_or_else(|| "gatehouse".into());
            let data = if settings.data_dir == std::path::Path::new("./data") {
                String::new()
            } else {
                format!(" --data-dir {}", settings.data_dir.display())
            };
            text.push_str(&format!(
                "Nobody can sign in to the dashboard yet. Make the first admin (it asks for a password):\n  {program}{data} user create --org {org} --email you@example.com --name \"Your Name\" --role admin --password-stdin\n"
            ));
        }
        Ok(None) => {}
        Err(e) => tracing::debug!(error = %e, "no first-admin hint"),
    }
    text
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
