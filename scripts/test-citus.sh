#!/usr/bin/env bash
# Runs chunked_map's tests on a Citus cluster: a coordinator and two workers on loopback,
# throw-away clusters started and stopped by the tests (tests/cluster/tests/citus.rs). Citus is
# not part of the project: where it is not installed in the PostgreSQL of $PG_MAJOR, this
# says so in one line and exits 0. The extension must be installed (scripts/install-extension.sh;
# scripts/test.sh does both). Its last line says which Citus and PostgreSQL it ran and how many
# tests passed.
# Usage: scripts/test-citus.sh [--pg N] [NAME_FILTER...]
set -euo pipefail
source "$(dirname "$0")/pg-option.sh"
source "$(dirname "$0")/lib.sh"

control="$("$PG_CONFIG" --sharedir)/extension/citus.control"
if [ ! -f "$control" ]; then
    echo "Citus tests skipped: Citus is not installed in PostgreSQL $PG_MAJOR ($control not found)"
    exit 0
fi
citus_version=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$control")
pg_version=$("$PG_CONFIG" --version)
log "Citus $citus_version found in $pg_version: running the Citus tests"
cd "$REPO_ROOT/tests/cluster"
# two at a time: each test starts three servers
output=$(mktemp)
trap 'rm -f "$output"' EXIT
status=0
cargo test --test citus -- --ignored --test-threads=2 "$@" 2>&1 | tee "$output" || status=$?
passed=$(sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\1/p' "$output" | tail -n 1)
failed=$(sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\2/p' "$output" | tail -n 1)
echo "Citus $citus_version on $pg_version: ${passed:-0} passed, ${failed:-?} failed"
exit "$status"
