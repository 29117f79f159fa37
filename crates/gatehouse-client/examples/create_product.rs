//! Creates a product safely under retries: the client sends one
//! `Idempotency-Key` with every attempt of the call, so a retry after a lost
//! answer never creates a second product (D50), and a SKU that already
//! exists is reported as such.
//!
//! ```text
//! GATEHOUSE_URL=http://127.0.0.1:4010 cargo run -p gatehouse-client --example create_product -- SHIRT-BLUE-M "Blue Shirt" 2500 10
//! ```

use gatehouse_client::{Client, Credentials, Error, ErrorCode, NewProduct, RetryReason};

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [sku, name, price, stock] = args.as_slice() else {
        return Err("usage: create_product SKU NAME PRICE_CENTS STOCK".into());
    };
    let mut builder = Client::builder(&env("GATEHOUSE_URL", "http://127.0.0.1:4010"))
        .credentials(Credentials::client_credentials(
            env("GATEHOUSE_CLIENT_ID", "mock_client"),
            env("GATEHOUSE_CLIENT_SECRET", "mock_secret"),
            ["products:write"],
        ))
        // Say what the client waits for; the waits themselves stay real.
        .sleep_hook(|d| {
            let why = match d.reason {
                RetryReason::RateLimited => "rate limited",
                RetryReason::IdempotencyKeyInUse => "the first attempt is still running",
                _ => "server or network failure",
            };
            eprintln!(
                "retry {} in {:.1} s ({why}, request {})",
                d.attempt,
                d.delay.as_secs_f64(),
                d.request_id.as_deref().unwrap_or("-")
            );
            tokio::time::sleep(d.delay)
        });
    if let Ok(ca) = std::env::var("GATEHOUSE_CA") {
        builder = builder.root_certificate_file(ca)?;
    }
    let client = builder.build()?;
    let new = NewProduct::new(name.as_str(), sku.as_str(), price.parse()?, stock.parse()?);
    match client.create_product(&new).await {
        Ok(p) => println!("created {} ({})", p.id, p.sku),
        Err(Error::Api {
            code: ErrorCode::DuplicateResource,
            ..
        }) => println!("a product with SKU {sku} already exists"),
        Err(Error::Api {
            code: ErrorCode::ValidationError,
            details,
            ..
        }) => {
            for d in details {
                eprintln!("{}: {}", d.field, d.issue);
            }
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("failed: {e}");
            std::process::exit(1);
        }
    }
    Ok(())
}
