//! Integration tests: each starts the real server (HTTPS on an ephemeral
//! port, a fresh SQLite database in a temporary directory) and talks HTTP to
//! it. One test binary, so the suite links once.

mod common;

/// This binary runs the suite on SQLite; `api_postgres` on PostgreSQL.
pub const BACKEND: common::Backend = common::Backend::Sqlite;

mod account;
mod audit;
mod browser;
mod cli;
mod client;
mod dashboard;
mod docs;
mod emails;
mod environments;
mod events;
mod hardening;
mod idempotency;
mod interop_openidconnect;
mod introspection;
mod invitations;
mod master_key;
mod mfa;
mod mock;
mod oauth_flow;
mod outside;
mod products;
mod profile;
mod ratelimits;
mod readme;
mod revocation;
mod secrets;
mod tokens;
mod transport;
mod users;
mod versions;
mod webhooks;
