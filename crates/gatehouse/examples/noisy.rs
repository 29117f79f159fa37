//! Issue 16's noisy-neighbour benchmark: while `--noisy` clients run a slow
//! search in a loop, point reads are sent open loop at a fixed `--rate` over
//! `--conns` other connections, and their latency is measured from when
//! each was due (so a stalled server cannot hide its stalls by slowing the
//! sender: no coordinated omission). Prints p50/p99/p99.9/max of the point
//! reads and how many searches completed.
//!
//!     cargo run --release -p gatehouse --example noisy -- --base https://localhost:8443 \
//!         --ca DATA/tls/cert.pem --token T --noisy-path '/v1/users?q=ad' --read-path /v1/users/usr_…
//!
//! `scripts/search-bench.sh` runs it after the query table (NOISY=0 skips it).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    base: String,
    /// The server's certificate (PEM) to trust.
    #[arg(long)]
    ca: std::path::PathBuf,
    #[arg(long)]
    token: String,
    #[arg(long, default_value = "/v1/users?q=ad")]
    noisy_path: String,
    #[arg(long, default_value_t = 8)]
    noisy: usize,
    #[arg(long)]
    read_path: String,
    /// Point reads per second, in all.
    #[arg(long, default_value_t = 2000)]
    rate: u64,
    #[arg(long, default_value_t = 64)]
    conns: u64,
    #[arg(long, default_value_t = 20)]
    seconds: u64,
}

fn client(ca: &[u8]) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca)?)
        .pool_max_idle_per_host(1)
        .http1_only()
        .build()?)
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((p / 100.0) * (sorted.len() - 1) as f64).round() as usize]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let args = Args::parse();
    let ca = std::fs::read(&args.ca).context("--ca")?;
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let searches = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));

    let mut noisy = Vec::new();
    for _ in 0..args.noisy {
        let (c, url, token) = (
            client(&ca)?,
            format!("{}{}", args.base, args.noisy_path),
            args.token.clone(),
        );
        let (searches, errors) = (searches.clone(), errors.clone());
        noisy.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                match c.get(&url).bearer_auth(&token).send().await {
                    Ok(r) if r.status().is_success() => {
                        let _ = r.bytes().await;
                        searches.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    // Let the searches fill the server first.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let interval = Duration::from_secs_f64(args.conns as f64 / args.rate as f64);
    // Each reader's connection is open (TLS handshake done) before the clock starts.
    let mut clients = Vec::new();
    for _ in 0..args.conns {
        let c = client(&ca)?;
        c.get(format!("{}{}", args.base, args.read_path))
            .bearer_auth(&args.token)
            .send()
            .await?
            .bytes()
            .await?;
        clients.push(c);
    }
    let start = Instant::now();
    let mut readers = Vec::new();
    for (i, c) in (0..args.conns).zip(clients) {
        let (url, token) = (
            format!("{}{}", args.base, args.read_path),
            args.token.clone(),
        );
        let errors = errors.clone();
        let first = start + interval.mul_f64(i as f64 / args.conns as f64);
        readers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut due = first;
            while due < deadline {
                tokio::time::sleep_until(due.into()).await;
                match c.get(&url).bearer_auth(&token).send().await {
                    Ok(r) if r.status().is_success() => {
                        let _ = r.bytes().await;
                    }
                    _ => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                latencies.push(due.elapsed().as_secs_f64() * 1000.0);
                due += interval;
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for r in readers {
        all.extend(r.await?);
    }
    let took = start.elapsed().as_secs_f64();
    for n in noisy {
        n.await?;
    }
    all.sort_by(f64::total_cmp);
    println!(
        "point reads: {} in {took:.1} s ({:.0}/s, open loop at {}/s over {} connections) p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms; alongside {} searches `{}` by {} clients ({:.1}/s); errors {}",
        all.len(),
        all.len() as f64 / took,
        args.rate,
        args.conns,
        pct(&all, 50.0),
        pct(&all, 99.0),
        pct(&all, 99.9),
        all.last().copied().unwrap_or_default(),
        searches.load(Ordering::Relaxed),
        args.noisy_path,
        args.noisy,
        searches.load(Ordering::Relaxed) as f64 / took,
        errors.load(Ordering::Relaxed),
    );
    Ok(())
}
