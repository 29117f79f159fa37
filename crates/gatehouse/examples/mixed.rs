//! Issue 16's mixed load test: `--conns` keep-alive HTTPS clients, each in a
//! closed loop, each request drawn from a realistic mix — point reads, list
//! pages, searches, writes (user and product creation, product updates) and
//! client-credentials tokens — for `--seconds`; prints per operation the
//! count, the rate, p50/p99 and the errors (any answer but the expected
//! status). `scripts/mixed-load.sh` seeds a server and runs it on SQLite or
//! PostgreSQL.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use serde_json::{Value, json};

#[derive(Parser)]
struct Args {
    #[arg(long)]
    base: String,
    /// The server's certificate (PEM) to trust.
    #[arg(long)]
    ca: std::path::PathBuf,
    #[arg(long)]
    client_id: String,
    #[arg(long)]
    client_secret: String,
    #[arg(long, default_value_t = 64)]
    conns: usize,
    #[arg(long, default_value_t = 60)]
    seconds: u64,
}

/// The mix, in percent of requests.
const MIX: [(&str, u32); 8] = [
    ("GET /v1/users/{id}", 40),
    ("GET /v1/products/{id}", 10),
    ("GET /v1/users?offset= (list page)", 12),
    ("GET /v1/users?q= (search)", 6),
    ("GET /v1/products?q= (search)", 4),
    ("POST /v1/users", 4),
    ("POST /v1/products + PATCH", 8),
    ("POST /oauth/token", 16),
];
const TERMS: [&str; 8] = [
    "ad",
    "hopper",
    "knuth",
    "northwind",
    "lin",
    "zzq",
    "grace",
    "@acme",
];
const WORDS: [&str; 6] = ["cot", "blue shirt", "wool", "s", "silk", "zzq"];

fn client(ca: &[u8]) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca)?)
        .pool_max_idle_per_host(1)
        .http1_only()
        .build()?)
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

async fn token(c: &reqwest::Client, args: &Args) -> anyhow::Result<String> {
    let r: Value = c
        .post(format!("{}/oauth/token", args.base))
        .basic_auth(&args.client_id, Some(&args.client_secret))
        .form(&[
            ("grant_type", "client_credentials"),
            (
                "scope",
                "users:read users:write products:read products:write",
            ),
        ])
        .send()
        .await?
        .json()
        .await?;
    Ok(r["access_token"].as_str().context("a token")?.to_owned())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let args = Arc::new(Args::parse());
    let ca = std::fs::read(&args.ca).context("--ca")?;
    let setup = client(&ca)?;
    let bearer = token(&setup, &args).await?;
    // Ids to read: the newest 100 users and products, and the list's size.
    let list: Value = setup
        .get(format!("{}/v1/users?limit=100", args.base))
        .bearer_auth(&bearer)
        .send()
        .await?
        .json()
        .await?;
    let total = list["meta"]["total"].as_u64().unwrap_or(0);
    let ids = |v: &Value| -> Vec<String> {
        v["data"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|u| u["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let users = Arc::new(ids(&list));
    let products: Value = setup
        .get(format!("{}/v1/products?limit=100", args.base))
        .bearer_auth(&bearer)
        .send()
        .await?
        .json()
        .await?;
    let products = Arc::new(ids(&products));
    anyhow::ensure!(
        !users.is_empty() && !products.is_empty(),
        "seed the organization first"
    );

    type Stats = BTreeMap<&'static str, (Vec<f64>, u64)>;
    let stats: Arc<Mutex<Stats>> = Arc::default();
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let start = Instant::now();
    let mut workers = Vec::new();
    for w in 0..args.conns {
        let c = client(&ca)?;
        // The connection is open before the clock matters.
        c.get(format!("{}/healthz", args.base))
            .send()
            .await?
            .bytes()
            .await?;
        let (args, bearer, users, products, stats) = (
            args.clone(),
            bearer.clone(),
            users.clone(),
            products.clone(),
            stats.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((w as u64 + 1) * 0x1234_5678_9ABC));
            let mut mine: Stats = BTreeMap::new();
            let mut n = 0u64;
            while Instant::now() < deadline {
                n += 1;
                let mut pick = (rng.next() % 100) as u32;
                let op = MIX
                    .iter()
                    .find(|(_, p)| {
                        if pick < *p {
                            true
                        } else {
                            pick -= p;
                            false
                        }
                    })
                    .map_or(MIX[0].0, |(o, _)| *o);
                let base = &args.base;
                let t = Instant::now();
                let ok = match op {
                    "GET /v1/users/{id}" => {
                        let id = &users[rng.next() as usize % users.len()];
                        send(c.get(format!("{base}/v1/users/{id}")).bearer_auth(&bearer), 200).await
                    }
                    "GET /v1/products/{id}" => {
                        let id = &products[rng.next() as usize % products.len()];
                        send(c.get(format!("{base}/v1/products/{id}")).bearer_auth(&bearer), 200).await
                    }
                    "GET /v1/users?offset= (list page)" => {
                        let offset = rng.next() % total.max(1);
                        send(c.get(format!("{base}/v1/users?limit=20&offset={offset}")).bearer_auth(&bearer), 200).await
                    }
                    "GET /v1/users?q= (search)" => {
                        let q = TERMS[rng.next() as usize % TERMS.len()];
                        send(c.get(format!("{base}/v1/users?q={}", encode(q))).bearer_auth(&bearer), 200).await
                    }
                    "GET /v1/products?q= (search)" => {
                        let q = WORDS[rng.next() as usize % WORDS.len()];
                        send(c.get(format!("{base}/v1/products?q={}", encode(q))).bearer_auth(&bearer), 200).await
                    }
                    "POST /v1/users" => {
                        let body = json!({"email": format!("mixed.{w}.{n}@example.com"), "name": format!("Mixed {w} {n}"), "role": "viewer"});
                        send(c.post(format!("{base}/v1/users")).bearer_auth(&bearer).json(&body), 201).await
                    }
                    "POST /v1/products + PATCH" => {
                        // Half create, half change the stock of a product just made by this worker.
                        if n.is_multiple_of(2) {
                            let body = json!({"name": format!("Mixed Kite {w} {n}"), "sku": format!("MX-{w}-{n}"), "price": 100, "stock": 5});
                            send(c.post(format!("{base}/v1/products")).bearer_auth(&bearer).json(&body), 201).await
                        } else {
                            let id = &products[rng.next() as usize % products.len()];
                            let body = json!({"stock": rng.next() % 50});
                            send(c.patch(format!("{base}/v1/products/{id}")).bearer_auth(&bearer).json(&body), 200).await
                        }
                    }
                    _ => {
                        send(
                            c.post(format!("{base}/oauth/token"))
                                .basic_auth(&args.client_id, Some(&args.client_secret))
                                .form(&[("grant_type", "client_credentials"), ("scope", "users:read")]),
                            200,
                        )
                        .await
                    }
                };
                let e = mine.entry(op).or_default();
                e.0.push(t.elapsed().as_secs_f64() * 1000.0);
                if !ok {
                    e.1 += 1;
                }
            }
            let mut all = stats.lock().unwrap();
            for (op, (lat, err)) in mine {
                let e = all.entry(op).or_default();
                e.0.extend(lat);
                e.1 += err;
            }
        }));
    }
    for w in workers {
        w.await?;
    }
    let took = start.elapsed().as_secs_f64();
    let mut stats = std::mem::take(&mut *stats.lock().unwrap());
    let (mut count, mut errors) = (0usize, 0u64);
    println!("| Operation | share | requests | per s | p50 ms | p99 ms | errors |");
    println!("|---|---|---|---|---|---|---|");
    for (op, share) in MIX {
        let (lat, err) = stats.remove(op).unwrap_or_default();
        let mut lat = lat;
        lat.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            if lat.is_empty() {
                0.0
            } else {
                lat[((p / 100.0) * (lat.len() - 1) as f64).round() as usize]
            }
        };
        println!(
            "| {op} | {share} % | {} | {:.0} | {:.2} | {:.2} | {err} |",
            lat.len(),
            lat.len() as f64 / took,
            pct(50.0),
            pct(99.0)
        );
        count += lat.len();
        errors += err;
    }
    println!(
        "| all | 100 % | {count} | {:.0} | | | {errors} |",
        count as f64 / took
    );
    Ok(())
}

/// Sends and reads the whole answer; whether it had the expected status.
async fn send(req: reqwest::RequestBuilder, expect: u16) -> bool {
    match req.send().await {
        Ok(r) => {
            let ok = r.status().as_u16() == expect;
            r.bytes().await.is_ok() && ok
        }
        Err(_) => false,
    }
}

/// The few characters of the mix's terms that a query string must escape.
fn encode(q: &str) -> String {
    q.replace(' ', "%20").replace('@', "%40")
}
