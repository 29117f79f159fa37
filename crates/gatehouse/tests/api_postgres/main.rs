//! The whole integration suite again, on PostgreSQL (D44, issue 5): the same
//! test modules as `api`, with every test server on a fresh database of a
//! throwaway cluster that the harness starts with the PostgreSQL binaries
//! (`gatehouse_store_postgres::testing`). Tests that start their own server
//! processes from a bare data directory (`transport`'s restarts, the mock)
//! run on SQLite here as well.
//!
//! Without the binaries the binary is skipped with a loud message, unless
//! `GATEHOUSE_REQUIRE_POSTGRES=1` (CI), where that fails.

#[path = "../api/common/mod.rs"]
mod common;

pub const BACKEND: common::Backend = common::Backend::Postgres;

#[path = "../api/account.rs"]
mod account;
#[path = "../api/audit.rs"]
mod audit;
#[path = "../api/browser.rs"]
mod browser;
#[path = "../api/cli.rs"]
mod cli;
#[path = "../api/client.rs"]
mod client;
#[path = "../api/dashboard.rs"]
mod dashboard;
#[path = "../api/emails.rs"]
mod emails;
#[path = "../api/environments.rs"]
mod environments;
#[path = "../api/events.rs"]
mod events;
#[path = "../api/idempotency.rs"]
mod idempotency;
#[path = "../api/introspection.rs"]
mod introspection;
#[path = "../api/invitations.rs"]
mod invitations;
#[path = "../api/master_key.rs"]
mod master_key;
#[path = "../api/mfa.rs"]
mod mfa;
#[path = "../api/oauth_flow.rs"]
mod oauth_flow;
#[path = "../api/outside.rs"]
mod outside;
#[path = "../api/products.rs"]
mod products;
#[path = "../api/profile.rs"]
mod profile;
#[path = "../api/ratelimits.rs"]
mod ratelimits;
#[path = "../api/revocation.rs"]
mod revocation;
#[path = "../api/secrets.rs"]
mod secrets;
#[path = "../api/tokens.rs"]
mod tokens;
#[path = "../api/transport.rs"]
mod transport;
#[path = "../api/users.rs"]
mod users;
#[path = "../api/versions.rs"]
mod versions;
#[path = "../api/webhooks.rs"]
mod webhooks;

/// Only here: several nodes on one PostgreSQL database.
mod multinode;
mod multinode_dashboard;
mod multinode_events;
mod multinode_logout;
