#!/usr/bin/env bash
# The failure drills (crates/gatehouse/tests/drills.rs), about a minute, run
# outside .ci/run like the benchmarks:
#   * PostgreSQL stopped for 10 s under a mixed load through two nodes: 503s
#     with Retry-After, nothing slower than 5 s, service back within 5 s of
#     the database, every acknowledged write kept (D6, D21, D43, D44);
#   * SQLite on a full disk (a small tmpfs, so root): writes 503, reads 200,
#     writes again once space is freed, integrity_check clean, nothing lost.
# Missing PostgreSQL binaries or an unmountable tmpfs fail here (set
# GATEHOUSE_REQUIRE_POSTGRES=0 / GATEHOUSE_REQUIRE_MOUNT=0 to skip loudly).
#
#   scripts/drills.sh            # both
#   scripts/drills.sh sqlite     # a name filter
set -euo pipefail
cd "$(dirname "$0")/.."
export GATEHOUSE_REQUIRE_POSTGRES=${GATEHOUSE_REQUIRE_POSTGRES:-1}
export GATEHOUSE_REQUIRE_MOUNT=${GATEHOUSE_REQUIRE_MOUNT:-1}
cargo test -p gatehouse --test drills -- --ignored "$@"
