//! A benchmarking tool, not an operator command: fills one existing
//! organization with N users and N products of realistic, deterministic
//! data (a fixed pseudo-random seed), straight through the real schema, so a
//! server started on the same database lists and searches them.
//!
//!     gatehouse --data-dir D org create --name Big --plan enterprise --json
//!     cargo run --release -p gatehouse --example seed -- \
//!         --database-url sqlite://D/gatehouse.db --org org_… --users 1000000 --products 1000000
//!
//! `--database-url postgres://…` loads PostgreSQL through `psql` and `COPY`
//! (`psql` on `PATH`). The migrations must have run (any `gatehouse` command
//! on the database runs them) and the organization must exist.
//!
//! Why here and not in the store crates: the stores are "load and store
//! only" and validate every row they write; a million rows through
//! `create_user` would take minutes. This tool writes rows the domain would
//! accept (ASCII names and e-mails, so `email_norm` is the lower-cased
//! e-mail) in one transaction (SQLite: one `INSERT … SELECT` per table from
//! a temporary table, whose triggers fill the counters and the search change
//! feed; PostgreSQL: one `COPY` per table, whose statement-level triggers
//! do the same). Search is the servers' in-memory index, built from these
//! rows at an organization's first `q` (`docs/storage.md`).
//!
//! The data (see `docs/performance.md`, "Search and deep pages at a million"):
//! - users: `First Last` from 100 first names and 25 surnames (each surname
//!   4 %), e-mail `first.last.I@domain` (I the row's number, 0-based, so
//!   `.500000@` is one user), 9 domains of about 11 % each; roles 1/20/79 %
//!   admin/editor/viewer, statuses 85/10/5 % active/inactive/pending_invite.
//! - products: `Adjective Material Kind` (`Blue Cotton Shirt`), SKU
//!   `KIN-0000042`, stock 0–499 (about 10 % zero), 5 % discontinued.
//! - `created_at` increases with I (row I+1 is one millisecond newer), so
//!   insertion order is list order.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Parser;

#[derive(Parser)]
#[command(about = "Benchmarking only: seed one organization with N users and N products")]
struct Args {
    /// `sqlite://PATH` or `postgres://…` (as the binary's --database-url).
    #[arg(long, conflicts_with = "data_dir")]
    database_url: Option<String>,
    /// The data directory of a SQLite deployment (its `gatehouse.db`).
    #[arg(long)]
    data_dir: Option<std::path::PathBuf>,
    /// The organization to fill (it must exist).
    #[arg(long)]
    org: String,
    #[arg(long, default_value_t = 1_000_000)]
    users: u64,
    #[arg(long, default_value_t = 1_000_000)]
    products: u64,
    /// The pseudo-random seed (the same seed gives the same rows).
    #[arg(long, default_value_t = 16)]
    seed: u64,
}

const FIRST: [&str; 100] = [
    "Ada", "Adam", "Adrian", "Aisha", "Alan", "Alice", "Amara", "Ana", "Andrei", "Anna", "Arjun",
    "Ben", "Bianca", "Brian", "Carla", "Carlos", "Chen", "Chloe", "Chris", "Clara", "Daniel",
    "David", "Diego", "Elena", "Eli", "Emma", "Eric", "Eva", "Fatima", "Felix", "Fiona", "Frank",
    "Gina", "Grace", "Hana", "Hassan", "Helen", "Hugo", "Ines", "Ivan", "Jack", "James", "Jana",
    "Jin", "John", "Jose", "Julia", "Kai", "Karen", "Kenji", "Laura", "Leo", "Lily", "Lucas",
    "Luis", "Maria", "Mark", "Marta", "Maya", "Mei", "Mohamed", "Nina", "Noah", "Nora", "Olga",
    "Omar", "Oscar", "Paul", "Pedro", "Petra", "Priya", "Quinn", "Rahul", "Rita", "Robert", "Rosa",
    "Ruth", "Sam", "Sara", "Sergei", "Simon", "Sofia", "Sven", "Tara", "Tom", "Uma", "Victor",
    "Vera", "Wei", "Will", "Xavier", "Yara", "Yusuf", "Zoe", "Ingrid", "Kofi", "Lena", "Mateo",
    "Nadia", "Pablo",
];
// 25 surnames: each about 4 % of the users.
const LAST: [&str; 25] = [
    "Hopper",
    "Knuth",
    "Lovelace",
    "Turing",
    "Dijkstra",
    "Liskov",
    "Ritchie",
    "Thompson",
    "Torvalds",
    "Hamilton",
    "Backus",
    "Kernighan",
    "Stroustrup",
    "Wirth",
    "Lamport",
    "Tanenbaum",
    "Berners",
    "Cerf",
    "Hoare",
    "Milner",
    "Goldberg",
    "Allen",
    "Sammet",
    "Perlman",
    "Wing",
];
// 9 domains: each about 11 %.
const DOMAINS: [&str; 9] = [
    "example.com",
    "northwind.test",
    "contoso.test",
    "acme.test",
    "globex.test",
    "initech.test",
    "umbrella.test",
    "hooli.test",
    "stark.test",
];
const ADJECTIVES: [&str; 12] = [
    "Blue", "Red", "Green", "Black", "White", "Grey", "Navy", "Olive", "Orange", "Pink", "Yellow",
    "Brown",
];
const MATERIALS: [&str; 8] = [
    "Cotton", "Wool", "Linen", "Denim", "Leather", "Silk", "Canvas", "Fleece",
];
const KINDS: [&str; 10] = [
    "Shirt", "Jeans", "Shoe", "Hat", "Sock", "Jacket", "Scarf", "Glove", "Belt", "Bag",
];

/// splitmix64: small, fast, and the same everywhere.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// A base62 id body of 22 characters (about 131 bits, as the domain's).
    fn id(&mut self, prefix: &str) -> String {
        const B62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        let mut s = String::with_capacity(prefix.len() + 23);
        s.push_str(prefix);
        s.push('_');
        for _ in 0..22 {
            s.push(B62[self.below(62) as usize] as char);
        }
        s
    }
}

/// Milliseconds since the epoch of the first row (2026-01-01T00:00:00Z).
const BASE_MS: i64 = 1_767_225_600_000;

struct UserRow {
    id: String,
    email: String,
    name: String,
    role: &'static str,
    status: &'static str,
    at: i64,
}

fn user(rng: &mut Rng, i: u64) -> UserRow {
    let first = FIRST[rng.below(FIRST.len() as u64) as usize];
    let last = LAST[rng.below(LAST.len() as u64) as usize];
    let domain = DOMAINS[rng.below(DOMAINS.len() as u64) as usize];
    let r = rng.below(100);
    let role = match r {
        0 => "admin",
        1..=20 => "editor",
        _ => "viewer",
    };
    let s = rng.below(100);
    let status = match s {
        0..=84 => "active",
        85..=94 => "inactive",
        _ => "pending_invite",
    };
    UserRow {
        id: rng.id("usr"),
        email: format!(
            "{}.{}.{i}@{domain}",
            first.to_lowercase(),
            last.to_lowercase()
        ),
        name: format!("{first} {last}"),
        role,
        status,
        at: BASE_MS + i as i64,
    }
}

struct ProductRow {
    id: String,
    name: String,
    sku: String,
    price: i64,
    stock: i64,
    status: &'static str,
    at: i64,
}

fn product(rng: &mut Rng, i: u64) -> ProductRow {
    let adj = ADJECTIVES[rng.below(ADJECTIVES.len() as u64) as usize];
    let material = MATERIALS[rng.below(MATERIALS.len() as u64) as usize];
    let kind = KINDS[rng.below(KINDS.len() as u64) as usize];
    let stock = if rng.below(10) == 0 {
        0
    } else {
        1 + rng.below(499) as i64
    };
    let status = if rng.below(20) == 0 {
        "discontinued"
    } else if stock > 0 {
        "available"
    } else {
        "out_of_stock"
    };
    ProductRow {
        id: rng.id("prod"),
        name: format!("{adj} {material} {kind}"),
        sku: format!("{}-{i:07}", kind[..3].to_uppercase()),
        price: 100 + rng.below(100_000) as i64,
        stock,
        status,
        at: BASE_MS + i as i64,
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let url = match (&args.database_url, &args.data_dir) {
        (Some(u), _) => u.clone(),
        (None, Some(d)) => format!("sqlite://{}", d.join("gatehouse.db").display()),
        (None, None) => bail!("give --database-url or --data-dir"),
    };
    let started = Instant::now();
    if let Some(path) = url.strip_prefix("sqlite://") {
        sqlite(path, &args)?;
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        postgres(&url, &args)?;
    } else {
        bail!("unsupported --database-url {url}");
    }
    eprintln!(
        "seeded {} users and {} products into {} in {:.1?}",
        args.users,
        args.products,
        args.org,
        started.elapsed()
    );
    Ok(())
}

fn sqlite(path: &str, args: &Args) -> anyhow::Result<()> {
    let mut c = rusqlite::Connection::open(path).with_context(|| format!("open {path}"))?;
    // The server's own settings (WAL); no fsync until the one commit.
    c.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF; PRAGMA cache_size=-262144;")?;
    let exists: i64 = c.query_row(
        "SELECT count(*) FROM organizations WHERE id = ?1",
        [&args.org],
        |r| r.get(0),
    )?;
    if exists != 1 {
        bail!(
            "no organization {} (create it with `gatehouse org create`)",
            args.org
        );
    }
    let tx = c.transaction()?;
    // The rows go to a temporary table first and into the real one with
    // one `INSERT … SELECT` per table: one statement per table for the
    // triggers and indexes of the real ones, in list order.
    tx.execute_batch(
        "CREATE TEMP TABLE seed_users (id TEXT, email TEXT, name TEXT, role TEXT, status TEXT, at INTEGER);
         CREATE TEMP TABLE seed_products (id TEXT, name TEXT, sku TEXT, price INTEGER, stock INTEGER, status TEXT, at INTEGER);",
    )?;
    {
        let mut rng = Rng(args.seed);
        let t = Instant::now();
        let mut st = tx.prepare("INSERT INTO seed_users VALUES (?1, ?2, ?3, ?4, ?5, ?6)")?;
        for i in 0..args.users {
            let u = user(&mut rng, i);
            st.execute(rusqlite::params![
                u.id, u.email, u.name, u.role, u.status, u.at
            ])?;
        }
        tx.execute(
            "INSERT INTO users (id, org_id, email, email_norm, name, role, status, created_at, updated_at)
             SELECT id, ?1, email, email, name, role, status, at, at FROM seed_users ORDER BY rowid",
            [&args.org],
        )?;
        eprintln!("users: {:.1?}", t.elapsed());
        let t = Instant::now();
        let mut rng = Rng(args.seed ^ 0x5EED);
        let mut st = tx.prepare("INSERT INTO seed_products VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")?;
        for i in 0..args.products {
            let p = product(&mut rng, i);
            st.execute(rusqlite::params![
                p.id, p.name, p.sku, p.price, p.stock, p.status, p.at
            ])?;
        }
        tx.execute(
            "INSERT INTO products (id, org_id, name, sku, price, stock, status, created_at, updated_at)
             SELECT id, ?1, name, sku, price, stock, status, at, at FROM seed_products ORDER BY rowid",
            [&args.org],
        )?;
        eprintln!("products: {:.1?}", t.elapsed());
    }
    tx.execute_batch("DROP TABLE seed_users; DROP TABLE seed_products;")?;
    // The triggers recorded every row for the search indexes to catch up
    // with (migration 12); no index predates the load, so none needs them.
    tx.execute("DELETE FROM search_changes WHERE org_id = ?1", [&args.org])?;
    let t = Instant::now();
    tx.commit()?;
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
    eprintln!("commit and checkpoint: {:.1?}", t.elapsed());
    Ok(())
}

/// COPY's text format: tab-separated, `\` escaped (the generated values hold
/// no tab, newline or backslash, so nothing needs escaping).
///
/// `table`'s deferred counting trigger (migration 19: one counter update
/// per row at commit, which makes a million-row `COPY` take many minutes)
/// is off during the `COPY`, and the table's counters are recounted after.
fn psql_copy(
    url: &str,
    table: &str,
    sql: &str,
    recount: &str,
    rows: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let off = format!("ALTER TABLE {table} DISABLE TRIGGER {table}_count_insert");
    let on = format!("ALTER TABLE {table} ENABLE TRIGGER {table}_count_insert");
    let mut child = Command::new("psql")
        // One transaction: a failed COPY leaves the trigger on.
        .args(["-q", "-1", "-v", "ON_ERROR_STOP=1", "-d", url])
        .args(["-c", &off, "-c", sql, "-c", &on, "-c", recount])
        .stdin(Stdio::piped())
        .spawn()
        .context("psql on PATH")?;
    {
        let stdin = child.stdin.take().expect("piped");
        let mut w = std::io::BufWriter::with_capacity(1 << 20, stdin);
        rows(&mut w)?;
        w.flush()?;
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("psql failed: {status}");
    }
    Ok(())
}

fn postgres(url: &str, args: &Args) -> anyhow::Result<()> {
    // The id goes into the recounts' SQL text: only an id's characters.
    if !args
        .org
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        bail!("not an organization id: {}", args.org);
    }
    let t = Instant::now();
    let org = args.org.clone();
    let users = args.users;
    let seed = args.seed;
    let recount_users = format!(
        "INSERT INTO user_counts (org_id, role, status, n)
         SELECT org_id, role, status, count(*) FROM users WHERE org_id = '{}' GROUP BY 1, 2, 3
         ON CONFLICT (org_id, role, status) DO UPDATE SET n = EXCLUDED.n",
        args.org
    );
    psql_copy(
        url,
        "users",
        "COPY users (id, org_id, email, email_norm, name, role, status, created_at, updated_at) FROM STDIN",
        &recount_users,
        move |w| {
            let mut rng = Rng(seed);
            for i in 0..users {
                let u = user(&mut rng, i);
                writeln!(
                    w,
                    "{}\t{org}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                    u.id,
                    u.email,
                    u.email.to_lowercase(),
                    u.name,
                    u.role,
                    u.status,
                    u.at,
                    u.at
                )?;
            }
            Ok(())
        },
    )?;
    eprintln!("users: {:.1?}", t.elapsed());
    let t = Instant::now();
    let org = args.org.clone();
    let products = args.products;
    let recount_products = format!(
        "INSERT INTO product_counts (org_id, status, n)
         SELECT org_id, status, count(*) FROM products WHERE org_id = '{}' GROUP BY 1, 2
         ON CONFLICT (org_id, status) DO UPDATE SET n = EXCLUDED.n",
        args.org
    );
    psql_copy(
        url,
        "products",
        "COPY products (id, org_id, name, sku, price, stock, status, created_at, updated_at) FROM STDIN",
        &recount_products,
        move |w| {
            let mut rng = Rng(seed ^ 0x5EED);
            for i in 0..products {
                let p = product(&mut rng, i);
                writeln!(
                    w,
                    "{}\t{org}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                    p.id, p.name, p.sku, p.price, p.stock, p.status, p.at, p.at
                )?;
            }
            Ok(())
        },
    )?;
    eprintln!("products: {:.1?}", t.elapsed());
    let t = Instant::now();
    let out = Command::new("psql")
        .args([
            "-q",
            "-d",
            url,
            "-c",
            // As on SQLite: no search index predates the load.
            &format!(
                "DELETE FROM search_changes WHERE org_id = '{}'",
                args.org.replace('\'', "")
            ),
            "-c",
            "ANALYZE users; ANALYZE products; ANALYZE search_changes;",
        ])
        .status()?;
    if !out.success() {
        bail!("ANALYZE failed");
    }
    eprintln!("analyze: {:.1?}", t.elapsed());
    Ok(())
}
