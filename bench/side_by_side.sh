# Sourced by the benches that run chunked_map_message_store beside message-db 1.3 (npm's
# @eventide/message-db, tests/message_db) on one throw-away cluster: bench/message_db.sh and
# bench/message_db_cpu.sh. Needs scripts/lib.sh sourced and the working directory at the
# repository's root.

# side_by_side_server BASE PORT [-c name=value ...]: installs what is missing, the extension's
# release build and message-db's npm package, starts a cluster in BASE on PORT with the settings
# given (stopped and removed when the script exits), and makes its two databases: message_db
# (message-db, its schema on the database's search_path, as its users put it: its functions
# call each other unqualified) and chunked (chunked_map and chunked_map_message_store).
# Exports PGHOST, PGPORT and PGUSER for the clients.
side_by_side_server() {
    local base=$1 port=$2
    shift 2
    scripts/prerequisites.sh >/dev/null
    scripts/install-extension.sh --release >/dev/null
    (cd tests/message_db && npm ci --silent --no-audit --no-fund)
    SIDE_BY_SIDE_BASE=$base
    trap side_by_side_cleanup EXIT
    scripts/pgcluster.sh start "$base" "$port" "$@"
    export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres
    log "message-db 1.3 (npm) into database message_db"
    (cd tests/message_db/node_modules/@eventide/message-db/database &&
        PATH="$PGBIN:$PATH" DATABASE_NAME=message_db bash install.sh >/dev/null)
    sql postgres -c "ALTER DATABASE message_db SET search_path = message_store, public"
    log "chunked_map_message_store into database chunked"
    sql postgres -c "CREATE DATABASE chunked"
    sql chunked -c "CREATE EXTENSION chunked_map" -c "CREATE EXTENSION chunked_map_message_store"
}

side_by_side_cleanup() {
    scripts/pgcluster.sh stop "$SIDE_BY_SIDE_BASE" >/dev/null 2>&1 || true
    rm -rf "$SIDE_BY_SIDE_BASE"
}

sql() { # sql DATABASE STATEMENT...: psql, quiet, unaligned, stopping at the first error
    local database=$1
    shift
    "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$database" "$@"
}

fail() { echo "$0: $*" >&2; exit 1; }

median() { # median: of the numbers on stdin, one a line
    sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2] + a[NR/2+1]) / 2}'
}
