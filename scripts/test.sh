#!/usr/bin/env bash
# Runs every test of chunked_map on every supported PostgreSQL, installing what is missing first:
#   PostgreSQL 15 (this machine's, Debian 12):
#     - unit tests and #[pg_test]s; the cluster tests (pg_regress and isolation suites, several
#       connections, crashes, dumps, roles, upgrades, preloading, the client examples): see
#       scripts/test-version.sh
#     - PostgreSQL's own regression suite with and without chunked_map (scripts/postgres-suite.sh)
#     - the HTTP service, the benchmark driver, the Diesel example
#   PostgreSQL 16 (the pgserver wheel), 17 (in a Debian 13 chroot), 18 (in a Debian forky chroot):
#     the unit tests, #[pg_test]s and cluster tests but the client examples
#   the Debian packages, each installed on a chroot of its distribution with only its PostgreSQL
#   (15: Debian 12, 17: Debian 13, 18: forky), and pg_upgrade from 15 to 17 the Debian way
#   (tests/package/run.sh, tests/package/pg_upgrade.sh)
#   the Citus tests, where Citus is installed
# First of all, cargo fmt --check and cargo clippy -D warnings.
# Ends with one line per PostgreSQL version: passed, failed, or skipped and why; fails if any
# failed. A version whose server cannot be had here (its wheel or chroot cannot be downloaded) is
# skipped, never reported as passed.
# Usage: scripts/test.sh [--pg N]... [-- NAME_FILTER]   (default: every version)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

versions=()
while [ $# -gt 0 ]; do
    case "$1" in
    --pg) versions+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) break ;;
    esac
done
[ ${#versions[@]} -gt 0 ] || versions=(15 16 17 18)
filter=("$@")

summary=()
failed=false
started_at=$SECONDS

# The code as written: formatted, and nothing clippy warns of (with Debian 12's PostgreSQL 15).
PG_MAJOR=15 scripts/prerequisites.sh
log "cargo fmt --check; cargo clippy --workspace --all-targets -- -D warnings"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
record() { summary+=("PostgreSQL $1: $2 ($(( (SECONDS - $3) / 60 )) min $(( (SECONDS - $3) % 60 )) s)"); }

for version in "${versions[@]}"; do
    began=$SECONDS
    case "$version" in
    15)
        # every part runs, whether or not one before it failed
        parts_failed=()
        PG_MAJOR=15 scripts/test-version.sh --with-clients "${filter[@]}" || parts_failed+=("tests")
        PG_MAJOR=15 scripts/postgres-suite.sh || parts_failed+=("PostgreSQL's regression suite")
        log "HTTP service, benchmark driver, Diesel example"
        cargo test --no-fail-fast -p subscribers-http -p chunked_map_bench -p chunked_map_diesel_example -- "${filter[@]}" ||
            parts_failed+=("HTTP service, benchmark driver, Diesel")
        if [ ${#parts_failed[@]} -eq 0 ]; then
            record 15 "passed: unit tests, #[pg_test]s, cluster tests with the client examples, PostgreSQL's regression suite with and without chunked_map, HTTP service, Diesel" "$began"
        else
            record 15 "FAILED: $(IFS=,; echo "${parts_failed[*]}")" "$began"; failed=true
        fi
        ;;
    16)
        if ! reason=$(PG_MAJOR=16 scripts/pg16.sh 2>&1 >/dev/null); then
            record 16 "skipped: its server could not be had (PyPI's pgserver wheel): $(echo "$reason" | tail -n 1)" "$began"
        elif PG_MAJOR=16 scripts/test-version.sh "${filter[@]}"; then
            record 16 "passed: unit tests, #[pg_test]s, cluster tests (server $("$PG16_ROOT/bin/postgres" --version | awk '{print $3}'), the pgserver wheel)" "$began"
        else
            record 16 "FAILED" "$began"; failed=true
        fi
        ;;
    17 | 18)
        if ! reason=$(scripts/chroot.sh prepare "$version" 2>&1 >/dev/null); then
            record "$version" "skipped: its server could not be had (a Debian $(debian_suite "$version") chroot): $(echo "$reason" | tail -n 1)" "$began"
        elif scripts/chroot.sh run "$version" scripts/test-version.sh "${filter[@]}"; then
            server=$(dpkg-query --admindir="$CACHE_DIR/chroots/build-$(debian_suite "$version")/var/lib/dpkg" \
                -W -f='${Version}' "postgresql-$version")
            record "$version" "passed: unit tests, #[pg_test]s, cluster tests (server $server, Debian $(debian_suite "$version"))" "$began"
        else
            record "$version" "FAILED" "$began"; failed=true
        fi
        ;;
    *)
        record "$version" "skipped: not a supported version" "$SECONDS"
        ;;
    esac
done

began=$SECONDS
log "the Debian packages, each on a system of its distribution without a toolchain"
if tests/package/run.sh "${versions[@]}"; then
    summary+=("packages: passed ($(( (SECONDS - began) / 60 )) min)")
else
    summary+=("packages: FAILED"); failed=true
fi

log "Citus (where it is installed)"
scripts/test-citus.sh || { summary+=("Citus: FAILED"); failed=true; }

echo
printf '%s\n' "${summary[@]}"
echo "whole run: $(( (SECONDS - started_at) / 60 )) min $(( (SECONDS - started_at) % 60 )) s"
if $failed; then
    log "some tests FAILED"
    exit 1
fi
log "all tests passed"
