#!/usr/bin/env bash
# The tests of chunked_map against one PostgreSQL ($PG_MAJOR; on the machine for 15 and 16,
# inside the version's chroot for 17 and 18, see scripts/test.sh):
#   1. unit tests and #[pg_test]s, inside a pgrx-managed server (cargo pgrx test)
#   2. the cluster tests (tests/cluster), each on a throw-away cluster: the pg_regress and
#      isolation suites, several connections, crashes, dumps, roles, upgrades, preloading; with
#      --with-clients also the client and consumer examples (they test the clients, and run
#      once, on PostgreSQL 15)
# Any other argument is passed to the cluster test binaries as a name filter.
# Usage: scripts/test-version.sh [--pg N] [--with-clients] [NAME_FILTER...]
set -euo pipefail
source "$(dirname "$0")/pg-option.sh"
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

with_clients=false
if [ "${1:-}" = --with-clients ]; then
    with_clients=true
    shift
fi

scripts/prerequisites.sh

# PostgreSQL will not run as root, and the server must be able to enter its data directory:
# pgrx's test server runs as user postgres, in a directory outside $HOME.
pgrx_pgdata=/tmp/chunked_map-pgrx-test-$PG_MAJOR
mkdir -p "$pgrx_pgdata"
as_root chown postgres: "$pgrx_pgdata"
log "PostgreSQL $PG_MAJOR: cargo pgrx test (unit tests and #[pg_test]s)"
cargo pgrx test "pg$PG_MAJOR" --runas postgres --pgdata "$pgrx_pgdata"

# cargo pgrx test installed its test build; put the real one (and the older versions'
# install scripts) in place for the cluster tests.
scripts/install-extension.sh

log "PostgreSQL $PG_MAJOR: cluster tests"
targets=()
for test in tests/cluster/tests/*.rs; do
    name=$(basename "$test" .rs)
    case "$name" in
    clients | consumer | message_db) $with_clients || continue ;;
    esac
    targets+=(--test "$name")
done
cargo test --no-fail-fast -p chunked_map_cluster_tests "${targets[@]}" -- "$@"
