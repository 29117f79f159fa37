//! The ground floor: HTTP as such, for every audience. It names nothing
//! else of this crate.
//!
//! - [`transport`]: connections, deadlines and limits below axum (D45);
//! - [`limits`]: the limits on a request (D8, D45);
//! - [`error`]: the API's error type and its one envelope (D6);
//! - [`middleware`]: the request's context (id, rate-limit slot, what a
//!   page may show), the pieces of the outer layer, the client's address;
//! - [`respond`]: the success envelopes (D5);
//! - [`form`]: the one reader of form bodies and query strings (D45);
//! - [`redirect`]: plain HTTP to HTTPS (D31);
//! - [`schemas`]: the OpenAPI schemas of wire fields the types do not say.

pub mod error;
pub mod form;
pub mod limits;
pub mod middleware;
pub mod redirect;
pub mod respond;
pub mod schemas;
pub mod transport;
