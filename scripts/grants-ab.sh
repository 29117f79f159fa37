#!/usr/bin/env bash
# Sign-in, code exchange and refresh of two gatehouse binaries side by side,
# behind a proxy (plain HTTP), in alternating rounds on loopback (issue 31:
# these three at ≥ 90 % of the build before; scripts/ab.sh does the read and
# the client-credentials token). The driver is the bench
# crates/gatehouse/benches/grants_ab.rs, built in release; its doc comment
# says what each figure counts.
#
#   scripts/grants-ab.sh OLD_BINARY NEW_BINARY
#
# Each round starts each binary on a fresh SQLite data directory, sets it up
# with the binary's own CLI and measures password sign-ins through the
# pages, authorize + code exchanges and refreshes. Prints every round, the
# medians and new/old; exits non-zero if any answer was not the expected
# one. Settings: ROUNDS (default 3), SECONDS (per measure, 5), CONCURRENCY
# (exchange and refresh workers, 8), SIGNIN_CONCURRENCY (4). The default
# run takes about a minute and a half, plus the bench's release build (5 to
# 10 minutes on two cores when the crates changed).
set -euo pipefail
# bash's own $SECONDS counts the time since this script started: read the
# caller's value from the environment instead.
DURATION=$(printenv SECONDS || echo 5)
OLD=${1:?usage: scripts/grants-ab.sh OLD_BINARY NEW_BINARY}
NEW=${2:?usage: scripts/grants-ab.sh OLD_BINARY NEW_BINARY}
OLD=$(realpath "$OLD")
NEW=$(realpath "$NEW")
cd "$(dirname "$0")/.."
exec env OLD="$OLD" NEW="$NEW" SECONDS="$DURATION" \
  cargo bench -p gatehouse --bench grants_ab
