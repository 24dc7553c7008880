#!/usr/bin/env bash
# Installs what is missing, builds and installs chunked_map, and runs the psql demo
# (sql/demo.sql) against a throw-away cluster that is stopped and removed afterwards.
# Usage: scripts/demo.sh [--pg N] [PORT]   (N: 15, the default, 16, 17 or 18; PORT: 55432;
#        PG_MAJOR=N in the environment does the same as --pg N). 17 and 18 run in their Debian
#        chroot (scripts/chroot.sh), made the first time.
set -euo pipefail
if [ "${1:-}" = --pg ]; then
    export PG_MAJOR=${2:?usage: demo.sh [--pg N] [PORT]}
    shift 2
fi
source "$(dirname "$0")/lib.sh"
port=${1:-55432}

case "$PG_MAJOR" in
15 | 16) ;;
17 | 18)
    if [ ! -f /etc/chunked_map-chroot ]; then
        exec "$REPO_ROOT/scripts/chroot.sh" run "$PG_MAJOR" scripts/demo.sh "$port"
    fi
    ;;
*)
    echo "PostgreSQL $PG_MAJOR is not supported: 15, 16, 17 or 18" >&2
    exit 2
    ;;
esac

"$REPO_ROOT/scripts/prerequisites.sh"
"$REPO_ROOT/scripts/install-extension.sh"

cluster=$(mktemp -d /tmp/chunked_map-demo.XXXXXX)
trap '"$REPO_ROOT/scripts/pgcluster.sh" stop "$cluster" >/dev/null 2>&1 || true; rm -rf "$cluster"' EXIT
log "starting a throw-away PostgreSQL $PG_MAJOR cluster in $cluster on port $port"
"$REPO_ROOT/scripts/pgcluster.sh" start "$cluster" "$port"

log "psql -f sql/demo.sql"
"$PGBIN/psql" -X -h "$cluster" -p "$port" -U postgres -d postgres \
    -v ON_ERROR_STOP=1 -f "$REPO_ROOT/sql/demo.sql"
