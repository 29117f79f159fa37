//! Lists every user of the organization, paging by itself.
//!
//! ```text
//! GATEHOUSE_URL=https://localhost:8443 GATEHOUSE_CA=data/tls/cert.pem \
//! GATEHOUSE_CLIENT_ID=app_… GATEHOUSE_CLIENT_SECRET=… \
//!     cargo run -p gatehouse-client --example list_users
//! ```
//!
//! Against `gatehouse mock`: `GATEHOUSE_URL=http://127.0.0.1:4010
//! GATEHOUSE_CLIENT_ID=mock_client GATEHOUSE_CLIENT_SECRET=mock_secret`.

use futures_util::TryStreamExt;
use gatehouse_client::{Client, Credentials, UserFilter};

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut builder = Client::builder(&env("GATEHOUSE_URL", "http://127.0.0.1:4010")).credentials(
        Credentials::client_credentials(
            env("GATEHOUSE_CLIENT_ID", "mock_client"),
            env("GATEHOUSE_CLIENT_SECRET", "mock_secret"),
            ["users:read"],
        ),
    );
    if let Ok(ca) = std::env::var("GATEHOUSE_CA") {
        builder = builder.root_certificate_file(ca)?;
    }
    let client = builder.build()?;
    let mut users = client.list_users(UserFilter::new().limit(100));
    let mut n = 0;
    while let Some(u) = users.try_next().await? {
        println!("{}\t{}\t{}\t{}", u.id, u.role, u.status, u.email);
        n += 1;
    }
    eprintln!("{n} users");
    Ok(())
}
