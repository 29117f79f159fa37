//! The README's quick start runs as written (issue 13): its shell blocks
//! "First requests" and "Register an application", unchanged but for the
//! port, run by bash against a real server whose data directory is
//! `./data`. Needs bash, curl and jq (`.ci/run` installs them).

use std::process::Command;

use crate::common::TestServer;

/// The fenced `sh` blocks under the README heading `title`.
fn blocks_under(readme: &str, title: &str) -> String {
    let start = readme
        .find(&format!("\n## {title}\n"))
        .unwrap_or_else(|| panic!("the README has a section {title:?}"));
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    let section = &rest[..end];
    let mut out = String::new();
    let mut inside = false;
    for line in section.lines() {
        match (inside, line.trim_end()) {
            (false, "```sh") => inside = true,
            (true, "```") => inside = false,
            (true, l) => {
                out.push_str(l);
                out.push('\n');
            }
            _ => {}
        }
    }
    assert!(!out.is_empty(), "a shell block under {title:?}");
    out
}

#[tokio::test]
async fn the_readme_quick_start_registers_an_application_that_gets_a_token() {
    for tool in ["bash", "curl", "jq"] {
        if Command::new(tool).arg("--version").output().is_err() {
            assert!(
                std::env::var_os("CI").is_none(),
                "{tool} is needed for the README test"
            );
            eprintln!("SKIPPED: {tool} is not installed");
            return;
        }
    }
    let s = TestServer::start().await;
    let readme = include_str!("../../../../README.md");
    let port = s
        .url("")
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    let script = format!(
        "set -euo pipefail\n{}{}",
        blocks_under(readme, "First requests"),
        blocks_under(readme, "Register an application")
    )
    .replace(
        "https://localhost:8443",
        &format!("https://localhost:{port}"),
    );
    let work = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(s.data_dir(), work.path().join("data")).unwrap();
    let out = tokio::task::spawn_blocking({
        let dir = work.path().to_owned();
        move || {
            Command::new("bash")
                .arg("-c")
                .arg(&script)
                .current_dir(dir)
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the quick start failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("\"email\":\"ada@example.com\""),
        "a user was created: {stdout}"
    );
    assert!(
        stdout.contains("\"total\":0"),
        "the registered application listed products with its token: {stdout}"
    );
    // Issue 32: the usage shows the request the application made.
    let counted = stdout
        .match_indices("\"requests\":")
        .filter_map(|(i, m)| {
            let digits: String = stdout[i + m.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse::<u64>().ok()
        })
        .sum::<u64>();
    assert!(counted >= 1, "its usage counts its request: {stdout}");
}
