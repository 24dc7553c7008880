#!/usr/bin/env bash
# What a stream's chunk size costs the message store, per size (100, the default, 1,000 and
# 10,000): the write that archives a full chunk against the write after it (wall clock, in one
# session warmed up by a first write, each of 6 streams), and reading 1,000 records of archived
# chunks one at a time as a category batch reads them (message_store.record_at: a lookup of the
# chunk, then its arrays detoasted for one record), against 1,000 records of current chunks
# (each message's index row looked up first, for its address, in both).
# Own throw-away cluster, release build. Prints a markdown table and writes it to
# bench/results/message_store_chunks.md.
# Usage: bench/message_store_chunks.sh [ROUNDS]   (default 5 rounds of each read; medians)
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
cd "$REPO_ROOT"

rounds=${1:-5}
sizes=(100 1000 10000)
streams=6
scripts/prerequisites.sh >/dev/null
scripts/install-extension.sh --release >/dev/null

base=/tmp/chunked_map-chunks-bench-$$
port=26610
cleanup() {
    scripts/pgcluster.sh stop "$base" >/dev/null 2>&1 || true
    rm -rf "$base"
}
trap cleanup EXIT
scripts/pgcluster.sh start "$base" "$port" -c shared_buffers=512MB
export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres
sql() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d chunks "$@"; }
timed() { # timed STATEMENT...: each statement's time in ms, after a first write warmed the session
    {
        echo "SELECT message_store.write_message(gen_random_uuid()::varchar, 'warm-1', 'Warm', '{}');"
        echo '\timing on'
        printf '%s\n' "$@"
    } | "$PGBIN/psql" -X -q -d chunks | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p'
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
write() { echo "SELECT message_store.write_message(gen_random_uuid()::varchar, '$1', 'Written', '{\"n\": 1}');"; }

"$PGBIN/psql" -X -q -d postgres -c "CREATE DATABASE chunks"
sql -c "CREATE EXTENSION chunked_map" -c "CREATE EXTENSION chunked_map_message_store"
results=bench/results/message_store_chunks.md
mkdir -p bench/results
{
    echo "#### A stream's chunk size: the archiving write and reading archived records, this machine ($(nproc) cores); medians"
    echo
    echo "| chunk size | archived chunk (bytes stored) | archiving write ms | next write ms | 1,000 archived records ms | 1,000 current records ms |"
    echo "|---|---|---|---|---|---|"
} | tee "$results"
for size in "${sizes[@]}"; do
    # each stream: a full chunk of messages of ~80 bytes of JSON, then the write that archives it
    for s in $(seq "$streams"); do
        sql -c "SELECT chunked_map.chunked_start('s$size-$s', $size)" >/dev/null
        sql -c "SELECT count(message_store.write_message(gen_random_uuid()::varchar, 's$size-$s', 'Filled',
                    jsonb_build_object('n', n, 'text', 'some words of a message body')))
                FROM generate_series(1, $size) AS n" >/dev/null
    done
    archiving=() next=()
    for s in $(seq "$streams"); do
        mapfile -t times < <(timed "$(write "s$size-$s")" "$(write "s$size-$s")")
        archiving+=("${times[0]}")
        next+=("${times[1]}")
    done
    sql -c "VACUUM ANALYZE" >/dev/null
    # 1,000 records at spread positions of the streams' archived chunks, then of their current
    # chunks (filled to the size again, not over), one record_at each with the message's
    # address, as a category batch reads them
    for s in $(seq "$streams"); do
        sql -c "SELECT count(message_store.write_message(gen_random_uuid()::varchar, 's$size-$s', 'Filled',
                    jsonb_build_object('n', n, 'text', 'some words of a message body')))
                FROM generate_series(3, $size) AS n" >/dev/null
    done
    sql -c "VACUUM ANALYZE" >/dev/null
    # (positions spread by a multiplier, not random(): a volatile call in the subquery would be
    # evaluated again at each use of its column, the index row and the record another position)
    read_records() { # read_records FIRST_POSITION: 1,000 reads of records from that position on
        echo "SELECT count(r.*) FROM (SELECT 's$size-' || (1 + n % $streams) AS s,
                  $1 + (n * 7919) % $size AS p FROM generate_series(1, 1000) AS n) AS x
              CROSS JOIN LATERAL (SELECT i.record FROM message_store.message_index AS i
                                  WHERE i.stream_name = x.s AND i.position = x.p) AS i
              CROSS JOIN LATERAL message_store.record_at(x.s, x.p, i.record) AS r;"
    }
    archived=$(for _ in $(seq "$rounds"); do timed "$(read_records 0)"; done | median)
    current=$(for _ in $(seq "$rounds"); do timed "$(read_records "$size")"; done | median)
    bytes=$(sql -c "SELECT avg(pg_catalog.pg_column_size(a.payloads))::int FROM chunked_map.archived_chunk AS a
                    WHERE a.map LIKE 's$size-%'")
    echo "| $size | $bytes | $(printf '%s\n' "${archiving[@]}" | median) | $(printf '%s\n' "${next[@]}" | median) | $archived | $current |" |
        tee -a "$results"
done
echo
echo "written to $results"
