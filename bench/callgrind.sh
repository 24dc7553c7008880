#!/usr/bin/env bash
# Instructions per append, counted by valgrind's callgrind (stable on a noisy machine, unlike
# wall-clock time): a single-user backend of a throw-away cluster runs N prepared appends
# (chunked_register of a ~230-byte payload to one map, chunk size 100, so rollovers are
# included at their real rate), and the report divides the inclusive cost of the extension's
# function by N; the same with a retention policy (the newest 1,000 kept: a chunk removed at
# every rollover once ten are archived) and with a consumer following the map; a plain INSERT of
# the same payload into an indexed table, run the same way, is the reference. Uses the installed build of $PG_MAJOR (scripts/install-extension.sh --release
# first, as bench/run.sh does).
# Usage: bench/callgrind.sh [N]   (default 3000)
# Each measure also in transactions of 100 for the append and the plain INSERT.
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
cd "$REPO_ROOT"
command -v valgrind >/dev/null || as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind
calls=${1:-3000}
work=$(mktemp -d /tmp/chunked_map-callgrind.XXXXXX)
as_root chown postgres: "$work"
trap '[ -n "${KEEP:-}" ] || as_root rm -rf "$work"' EXIT
as_postgres() { if is_root; then su postgres -s /bin/bash -c "$*"; else bash -c "$*"; fi; }
as_postgres "$PGBIN/initdb -D $work/data -U postgres -A trust -E UTF8 --locale=C.UTF-8 >/dev/null"

payload="jsonb_build_object('email', 'user' || \$1 || '@example.com', 'name', 'Subscriber number ' || \$1, \
'plan', 'pro', 'source', 'newsletter-signup-form', 'referrer', 'https://example.com/landing/spring', \
'signed_up_at', '2026-11-30T01:23:45Z', 'tags', jsonb_build_array('early-adopter', 'eu', 'weekly'))"

# what to run: setup, then $calls executions of one prepared statement
# (PER_TRANSACTION=k: k executions per transaction, BEGIN and COMMIT around them; default 1:
# each its own)
script() {
    local statement=$1 setup=${2:-} per=${PER_TRANSACTION:-1}
    echo "CREATE EXTENSION IF NOT EXISTS chunked_map;"
    echo "SELECT chunked_map.chunked_drop('m');"
    echo "SELECT chunked_map.chunked_start('m', 100);"
    [ -z "$setup" ] || echo "$setup"
    echo "CREATE TABLE IF NOT EXISTS events (map text, id bigserial, payload jsonb);"
    echo "CREATE INDEX IF NOT EXISTS events_map_id ON events (map, id);"
    echo "PREPARE s(int) AS $statement;"
    for _ in $(seq 1 20); do echo "EXECUTE s(1);"; done   # warm the caches
    for i in $(seq 1 "$calls"); do
        if [ "$per" -gt 1 ] && [ $(( (i - 1) % per )) -eq 0 ]; then echo "BEGIN;"; fi
        echo "EXECUTE s($i);"
        if [ "$per" -gt 1 ] && { [ $(( i % per )) -eq 0 ] || [ "$i" -eq "$calls" ]; }; then echo "COMMIT;"; fi
    done
}

measure() {
    local name=$1 statement=$2 function=$3 setup=${4:-}
    script "$statement" "$setup" > "$work/$name.sql"
    chmod a+r "$work/$name.sql"
    as_postgres "cd $work && valgrind --tool=callgrind --callgrind-out-file=$work/$name.out \
        $PGBIN/postgres --single -D $work/data -c shared_buffers=128MB -c synchronous_commit=off \
        postgres < $work/$name.sql > $work/$name.log 2>&1"
    callgrind_annotate --inclusive=yes "$work/$name.out" > "$work/$name.txt" 2>/dev/null
    per_call() {
        local total
        total=$(grep -E "[:[:space:]]$1 " "$work/$name.txt" | head -n 1 | awk '{gsub(",", "", $1); print $1}')
        echo $(( ${total:-0} / (calls + 20) ))
    }
    echo "$name: $(per_call ExecuteQuery) instructions per EXECUTE (ExecuteQuery, inclusive); $(per_call "$function") in $function"
}

measure chunked_register "SELECT chunked_map.chunked_register('m', $payload)" "chunked_register_wrapper"
measure chunked_register_retained "SELECT chunked_map.chunked_register('m', $payload)" "chunked_register_wrapper" \
    "SELECT chunked_map.chunked_set_retention('m', 1000);"
measure chunked_register_followed "SELECT chunked_map.chunked_register('m', $payload)" "chunked_register_wrapper" \
    "SELECT chunked_map.chunked_subscribe('c', NULL, false);"
# (0.5) an append with an id (a new one each time: looked up, remembered, the window kept at
# every rollover)
measure chunked_register_once "SELECT seq FROM chunked_map.chunked_register_once('m', $payload, 'order-' || \$1 || '-created')" "chunked_register_once_wrapper"
measure plain_insert "INSERT INTO events (map, payload) VALUES ('m', $payload) RETURNING id" "standard_ExecutorRun"
# the same, 100 per transaction: after the first, an append finds the state row by the address
# the transaction last wrote, and the relations' locks are already held
PER_TRANSACTION=100 measure chunked_register_100_per_transaction "SELECT chunked_map.chunked_register('m', $payload)" "chunked_register_wrapper"
PER_TRANSACTION=100 measure plain_insert_100_per_transaction "INSERT INTO events (map, payload) VALUES ('m', $payload) RETURNING id" "standard_ExecutorRun"
