#!/usr/bin/env bash
# Runs chunked_map's tests on a Citus cluster: a coordinator and two workers on loopback,
# throw-away clusters started and stopped by the tests (tests/cluster/tests/citus.rs). Citus is
# not part of the project: where it is not installed in the PostgreSQL 15 found here, this
# says so in one line and exits 0. The extension must be installed (scripts/install-extension.sh;
# scripts/test.sh does both).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

control="$("$PG_CONFIG" --sharedir)/extension/citus.control"
if [ ! -f "$control" ]; then
    echo "Citus tests skipped: Citus is not installed in PostgreSQL 15 ($control not found)"
    exit 0
fi
log "Citus $(sed -n "s/^default_version = '\(.*\)'/\1/p" "$control") found: running the Citus tests"
cd "$REPO_ROOT/tests/cluster"
# two at a time: each test starts three servers
cargo test --test citus -- --ignored --test-threads=2 "$@"
