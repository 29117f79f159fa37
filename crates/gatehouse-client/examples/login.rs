//! An authorization-code login (with PKCE) from the command line: prints the
//! URL to open, reads the code (or the whole redirect URL) from stdin, then
//! shows the profile and the refresh token to keep.
//!
//! ```text
//! GATEHOUSE_URL=http://127.0.0.1:4010 GATEHOUSE_CLIENT_ID=mock_client \
//! GATEHOUSE_CLIENT_SECRET=mock_secret GATEHOUSE_REDIRECT_URI=http://127.0.0.1/callback \
//!     cargo run -p gatehouse-client --example login
//! ```
//!
//! The browser ends on the redirect URI (nothing listens there); copy the
//! address from the address bar and paste it.

use gatehouse_client::{AuthorizationRequest, Client};
use tokio::io::AsyncBufReadExt;

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let base = env("GATEHOUSE_URL", "http://127.0.0.1:4010");
    let client_id = env("GATEHOUSE_CLIENT_ID", "mock_client");
    let secret = std::env::var("GATEHOUSE_CLIENT_SECRET").ok();
    let redirect = env("GATEHOUSE_REDIRECT_URI", "http://127.0.0.1/callback");
    let req = AuthorizationRequest::new(&base, &client_id, &redirect, ["profile:read"])?;
    println!(
        "Open this address, sign in, and paste the address you end on:\n\n{}\n",
        req.url
    );

    let mut line = String::new();
    tokio::io::BufReader::new(tokio::io::stdin())
        .read_line(&mut line)
        .await?;
    let line = line.trim();
    let code = match url::Url::parse(line) {
        Ok(u) => {
            let q: std::collections::HashMap<_, _> = u.query_pairs().into_owned().collect();
            if q.get("state") != Some(&req.state) {
                return Err("the state does not match: not the answer to this request".into());
            }
            q.get("code").cloned().ok_or("no code in that address")?
        }
        Err(_) => line.to_owned(),
    };

    let mut builder = Client::builder(&base)
        .credentials(req.credentials(&client_id, secret.as_deref(), &code))
        .on_refresh_token(|rt| eprintln!("(new refresh token: {rt})"));
    if let Ok(ca) = std::env::var("GATEHOUSE_CA") {
        builder = builder.root_certificate_file(ca)?;
    }
    let client = builder.build()?;
    let me = client.get_profile().await?;
    println!("Signed in as {} <{}> ({})", me.name, me.email, me.role);
    if let Some(rt) = client.refresh_token() {
        println!("Keep this refresh token for next time: {rt}");
    }
    Ok(())
}
