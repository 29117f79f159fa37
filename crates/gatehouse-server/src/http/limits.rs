//! The limits on a request (D8, D45), in one place: what the transport,
//! the outer middleware and the body readers (JSON and forms) enforce.

/// Largest accepted JSON body (D8).
pub const MAX_BODY: usize = 64 * 1024;

/// Header fields per request; more is 431 (hyper's limit for HTTP/1.1 too).
pub const MAX_HEADERS: usize = 100;

/// Longest request target (path and query) answered normally (D45).
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// Most header bytes (names and values) answered normally (D45).
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
