//! `GATEHOUSE_WEBHOOK_DNS` (D55, D40 continued): webhook host names
//! resolved by one given DNS server instead of the system's, honoured only
//! with `--test-settings`, so a test can answer a public address when an
//! endpoint is checked and a loopback one when it is connected to (DNS
//! rebinding, which the sender refuses). Nothing is cached: every look-up
//! asks the server again, as a rebinding attacker's short TTL would have it.

use std::net::{IpAddr, SocketAddr};

use gatehouse_app::webhooks::HostLookup;
use hickory_resolver::TokioResolver;
use hickory_resolver::config::{NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::proto::xfer::Protocol;

/// Looks names up at one DNS server (UDP), uncached.
pub struct ServerLookup {
    resolver: TokioResolver,
}

impl ServerLookup {
    pub fn new(server: SocketAddr) -> Self {
        let mut config = ResolverConfig::new();
        config.add_name_server(NameServerConfig::new(server, Protocol::Udp));
        let mut opts = ResolverOpts::default();
        opts.cache_size = 0;
        opts.attempts = 1;
        opts.timeout = std::time::Duration::from_secs(2);
        let resolver =
            TokioResolver::builder_with_config(config, TokioConnectionProvider::default())
                .with_options(opts)
                .build();
        Self { resolver }
    }
}

#[async_trait::async_trait]
impl HostLookup for ServerLookup {
    async fn lookup(&self, host: &str, _port: u16) -> Result<Vec<IpAddr>, String> {
        // A trailing dot: the name as given, never a search domain.
        let fqdn = format!("{}.", host.trim_end_matches('.'));
        self.resolver
            .lookup_ip(fqdn)
            .await
            .map(|found| found.iter().collect())
            .map_err(|e| e.to_string())
    }
}
