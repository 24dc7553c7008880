#!/usr/bin/env bash
# Runs every test of chunked_map, installing what is missing first:
#   1. unit tests and #[pg_test]s, inside a pgrx-managed PostgreSQL (cargo pgrx test)
#   2. the pg_regress suite and the tests that need real servers of their own (several
#      connections, crashes, dumps, roles, upgrades, the client examples), each on a
#      throw-away cluster
#   3. the HTTP service driven over HTTP, and the benchmark driver's unit tests
#   4. the Debian package, installed on a Debian 12 without a toolchain (a cached chroot)
#   5. the Citus tests, on a coordinator and two workers, where Citus is installed (one line
#      saying it is not, elsewhere)
# Any argument is passed to the test binaries of steps 2 and 3 as a name filter.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

scripts/prerequisites.sh

# PostgreSQL will not run as root, and the server must be able to enter its data directory:
# pgrx's test server runs as user postgres, in a directory outside $HOME.
pgrx_pgdata=/tmp/chunked_map-pgrx-test
mkdir -p "$pgrx_pgdata"
as_root chown postgres: "$pgrx_pgdata"
log "cargo pgrx test (unit tests and #[pg_test]s)"
cargo pgrx test pg$PG_MAJOR --runas postgres --pgdata "$pgrx_pgdata"

# cargo pgrx test installed its test build; put the real one (and the older versions'
# install scripts) in place for the cluster tests.
scripts/install-extension.sh

log "cluster tests (pg_regress, concurrency, data safety, upgrades, client examples)"
cargo test -p chunked_map_cluster_tests -- "$@"

log "PostgreSQL's own regression suite, with and without chunked_map"
scripts/postgres-suite.sh

log "HTTP service, benchmark driver, Diesel example"
cargo test -p subscribers-http -p chunked_map_bench -p chunked_map_diesel_example -- "$@"

log "the Debian package on a machine without a toolchain"
tests/package/run.sh

log "Citus (where it is installed)"
scripts/test-citus.sh
log "all tests passed"
