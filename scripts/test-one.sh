#!/usr/bin/env bash
# The fast loop: builds and installs chunked_map incrementally for one PostgreSQL and runs only
# what is named — a regression file (tests/pg_regress/sql/NAME.sql), an isolation spec
# (tests/isolation/specs/NAME.spec, or a NAME_per_isolation_level spec of the template), or the
# cluster tests whose name contains NAME — with no lint, no #[pg_test]s, no PostgreSQL suite and
# no packages. Prerequisites must be installed (scripts/test.sh or scripts/demo.sh did it once).
# Usage: scripts/test-one.sh [--pg N] NAME [--accept]   (--accept: a regression file's or spec's
#        output becomes its expected file)
set -euo pipefail
source "$(dirname "$0")/pg-option.sh"
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

usage="scripts/test-one.sh [--pg N] NAME [--accept]"
name=${1:?usage: $usage}
shift
accept=false
if [ "${1:-}" = --accept ]; then
    accept=true
    shift
fi
refuse_arguments "$usage" "$@"

case "$PG_MAJOR" in
17 | 18)
    if [ ! -f /etc/chunked_map-chroot ]; then
        extra=()
        $accept && extra=(--accept)
        exec scripts/chroot.sh run "$PG_MAJOR" scripts/test-one.sh "$name" "${extra[@]}"
    fi
    ;;
esac

scripts/install-extension.sh >/dev/null
$accept && export CHUNKED_MAP_REGRESS_ACCEPT=1
if grep -qx "test: $name" tests/pg_regress/schedule; then
    CHUNKED_MAP_ONLY=$name cargo test -p chunked_map_cluster_tests --test regress -- pg_regress_output
elif grep -qx "test: $name" tests/isolation/schedule; then
    CHUNKED_MAP_ONLY=$name cargo test -p chunked_map_cluster_tests --test regress -- isolation_specs_match
else
    cargo test -p chunked_map_cluster_tests --tests -- "$name"
fi
