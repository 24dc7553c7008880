#!/usr/bin/env bash
# Installs what is missing, builds and installs chunked_map, and runs the psql demo
# (sql/demo.sql) against a throw-away cluster that is stopped and removed afterwards.
# Usage: scripts/demo.sh [PORT]   (default 55432)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
port=${1:-55432}

"$REPO_ROOT/scripts/prerequisites.sh"
"$REPO_ROOT/scripts/install-extension.sh"

cluster=$(mktemp -d /tmp/chunked_map-demo.XXXXXX)
trap '"$REPO_ROOT/scripts/pgcluster.sh" stop "$cluster" >/dev/null 2>&1 || true; rm -rf "$cluster"' EXIT
log "starting a throw-away cluster in $cluster on port $port"
"$REPO_ROOT/scripts/pgcluster.sh" start "$cluster" "$port"

log "psql -f sql/demo.sql"
"$PGBIN/psql" -X -h "$cluster" -p "$port" -U postgres -d postgres \
    -v ON_ERROR_STOP=1 -f "$REPO_ROOT/sql/demo.sql"
