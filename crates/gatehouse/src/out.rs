//! Standard output of the command line (issue 24). Rust's `println!` panics
//! when the reader has gone away (`gatehouse openapi | head -1`); here a
//! closed pipe ends a command quietly, as it ends any Unix tool, and a
//! running server's banner is simply not seen.

use std::io::{ErrorKind, Write};

fn write(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// A command's output. A reader that went away ends the process at once
/// with status 0 (the command's work is done; nobody is left to read the
/// rest); any other failure to write is reported on standard error, status 1.
pub fn print(text: &str) {
    match write(text) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("error: writing to standard output: {e}");
            std::process::exit(1);
        }
    }
}

/// A line a long-running command (`serve`, `mock`) shows when it starts:
/// when nobody reads standard output, the server keeps serving.
pub fn announce(text: &str) {
    if let Err(e) = write(text) {
        tracing::debug!(error = %e, "standard output is closed; not shown");
    }
}
