#!/usr/bin/env bash
# chunked_map_message_store side by side with message-db 1.3 (from npm, tests/message_db) on one
# throw-away cluster, in the same run: write_message with 1 writer and with 8 writers on 8
# streams of one category (message-db serializes them), with 1 writer that reads its stream's
# version and writes with it as the expected version, autocommit and in a transaction that
# goes on 1 ms after the write (a handler's own work); get_category_messages of 1,000 from a
# category of CATEGORY_SIZE among 10 categories; get_stream_messages of 1,000 at the end of a
# stream of STREAM_SIZE; and, as the ceiling of any write here, a transaction of one bare INSERT
# from 8 clients, message-db's own write with its lock on the stream instead of the category,
# and message-db's own write with its commits not waiting for the flush; the write of a store of
# one row a message written in PL/pgSQL as write_message is (bench/one_row_store.sql), and the
# append of a message's record alone (what no write_message on chunked_map's storage can beat),
# each with 1 and with 8 writers. pgbench, ROUNDS runs
# of SECONDS s of each system, interleaved, medians; then the WAL a write leaves, and
# instructions per write (with and without an expected version) and per message numbered
# (callgrind). Prints a markdown table and
# writes it to bench/results/message_db.md once the run is complete.
# Usage: bench/message_db.sh [ROUNDS] [SECONDS] [CATEGORY_SIZE] [STREAM_SIZE]
#        (default 3 rounds of 5 s, a category of 100000 (the issue's 1000000 takes ~10 times as
#        long to fill), a stream of 100000)
set -euo pipefail
# (a failure inside $(…) ends the script too: a figure is never made of a failed run)
shopt -s inherit_errexit
source "$(dirname "$0")/../scripts/lib.sh"
cd "$REPO_ROOT"

rounds=${1:-3}
seconds=${2:-5}
category_size=${3:-100000}
stream_size=${4:-100000}
source bench/side_by_side.sh
side_by_side_server "/tmp/chunked_map-message-db-bench-$$" 26600 -c max_connections=50 -c shared_buffers=512MB
base=$SIDE_BY_SIDE_BASE
# the floor: a store of one row a message, in a database of its own (bench/one_row_store.sql)
sql postgres -c "CREATE DATABASE one_row"
sql one_row -f bench/one_row_store.sql >/dev/null
# message-db's own write_message with its lock taken on the stream instead of the category
# (message_store.write_message_stream_locked, in the same database): what message-db's write
# costs when writers of different streams do not wait for each other, as chunked_map's do not
# (unsafe as a message store: its global positions could then commit out of order; a reference
# figure only). Made from the installed function's text, and checked to have its lock replaced.
sql message_db -c "
    DO \$\$
    DECLARE
        _def text := pg_catalog.pg_get_functiondef(
            'message_store.write_message(varchar, varchar, varchar, jsonb, jsonb, bigint)'::pg_catalog.regprocedure);
    BEGIN
        _def := pg_catalog.replace(_def, 'PERFORM acquire_lock(write_message.stream_name);',
                                   'PERFORM pg_advisory_xact_lock(hash_64(write_message.stream_name));');
        _def := pg_catalog.replace(_def, 'message_store.write_message(', 'message_store.write_message_stream_locked(');
        _def := pg_catalog.replace(_def, 'write_message.', 'write_message_stream_locked.');
        IF pg_catalog.strpos(_def, 'pg_advisory_xact_lock(hash_64(write_message_stream_locked.stream_name))') = 0
           OR pg_catalog.strpos(_def, 'acquire_lock') <> 0 THEN
            RAISE EXCEPTION 'message-db''s write_message is not as this bench knows it: %', _def;
        END IF;
        EXECUTE _def;
    END
    \$\$"

fill() { # fill DATABASE [STATEMENT]: 10 categories of category_size, one stream of stream_size,
    # 1,000 messages a transaction (a transaction that starts 10,000 streams would need 10,000
    # locks), STATEMENT run after each (chunked: the numbering a reader would do). Each its own
    # statement from psql, as clients write: a session reports what its transactions did to the
    # tables' statistics when it goes idle, so autovacuum sees the rows the store deletes (each
    # current record when its chunk is archived) and the row versions the numbering leaves; one
    # DO block running for half an hour never went idle, and current_record grew to 1.6 GB for
    # its 1,000,000 rows, each read of a current record touching a block of its own.
    local database=$1 after=${2:-} batch
    {
        for batch in $(seq 0 $(((category_size * 10 - 1) / 1000))); do
            echo "SELECT pg_catalog.count(message_store.write_message(gen_random_uuid()::varchar,
                      'cat' || (n % 10) || '-' || (n % 10000), 'Filled', jsonb_build_object('n', n)))
                  FROM generate_series($batch * 1000 + 1, LEAST(($batch + 1) * 1000, $category_size * 10)) AS n;"
            [ -z "$after" ] || echo "$after"
        done
        for batch in $(seq 0 $(((stream_size - 1) / 1000))); do
            echo "SELECT pg_catalog.count(message_store.write_message(gen_random_uuid()::varchar, 'long-1', 'Filled',
                      jsonb_build_object('n', n)))
                  FROM generate_series($batch * 1000 + 1, LEAST(($batch + 1) * 1000, $stream_size)) AS n;"
            [ -z "$after" ] || echo "$after"
        done
    } | sql "$database" >/dev/null
    sql "$database" -c "VACUUM ANALYZE" >/dev/null
}
# (chunked: global positions are given by reads, as consumers of a live store give them: a
# numbering after each batch of 1,000, so that the index rows it rewrites are vacuumed like the
# rest, not rewritten all at once after the VACUUM)
for database in message_db chunked one_row; do
    log "filling $database: $((category_size * 10)) messages in 10 categories, and a stream of $stream_size"
    start=$(date +%s)
    if [ "$database" = chunked ]; then
        fill "$database" "SELECT message_store.number_messages();"
    else
        fill "$database"
    fi
    echo "$database filled in $(($(date +%s) - start)) s"
done
sql chunked -c "SELECT count(*) FROM message_store.get_category_messages('cat3', 1, 1)" >/dev/null
# (a copy of message-db's database whose commits do not wait for the WAL flush, for the flush figure)
sql postgres -c "CREATE DATABASE message_db_unflushed TEMPLATE message_db" \
    -c "ALTER DATABASE message_db_unflushed SET synchronous_commit = off" \
    -c "ALTER DATABASE message_db_unflushed SET search_path = message_store, public"

scripts_dir=$base/scripts
mkdir -p "$scripts_dir"
echo "SELECT message_store.write_message(gen_random_uuid()::varchar, 'one-' || :client_id, 'Written', '{\"n\": 1}');" >"$scripts_dir/write.sql"
echo "SELECT message_store.write_message(gen_random_uuid()::varchar, 'hot-' || :client_id, 'Written', '{\"n\": 1}');" >"$scripts_dir/write_hot.sql"
echo "SELECT message_store.write_message_stream_locked(gen_random_uuid()::varchar, 'hot-' || :client_id, 'Written', '{\"n\": 1}');" >"$scripts_dir/write_hot_stream_locked.sql"
echo "INSERT INTO public.bare_insert VALUES (gen_random_uuid(), 'hot-' || :client_id, '{\"n\": 1}');" >"$scripts_dir/bare_insert.sql"
# (the payload write_message appends, made as it makes it: message_store.message_payload)
echo "SELECT chunked_map.chunked_register_with_id('append-' || :client_id, message_store.message_payload('Written', '{\"n\": 1}', NULL), gen_random_uuid()::text);" >"$scripts_dir/append_alone.sql"
sql postgres -c "CREATE TABLE public.bare_insert (id uuid, stream_name text, data jsonb)"
# a writer that knows its stream's version: the version read, then the write with it as the
# expected version (two statements, each its own transaction, as a client that reads an entity
# before it writes its event; a stream not yet written has version NULL, -1 here)
printf '%s\n' "SELECT coalesce(message_store.stream_version('known-' || :client_id), -1) AS version \\gset" \
    "SELECT message_store.write_message(gen_random_uuid()::varchar, 'known-' || :client_id, 'Written', '{\"n\": 1}', NULL, :version);" \
    >"$scripts_dir/write_expected.sql"
# a handler's transaction: the write, then 1 ms of the application's own work before the commit
printf '%s\n' "BEGIN;" \
    "SELECT message_store.write_message(gen_random_uuid()::varchar, 'hot-' || :client_id, 'Written', '{\"n\": 1}');" \
    "SELECT pg_sleep(0.001);" "COMMIT;" >"$scripts_dir/write_hot_handler.sql"
# a batch from a random global position of category cat3
printf '%s\n' "\\set position random(1, $((category_size * 10 - 10000)))" \
    "SELECT count(*) FROM message_store.get_category_messages('cat3', :position, 1000);" >"$scripts_dir/category.sql"
echo "SELECT count(*) FROM message_store.get_stream_messages('long-1', $((stream_size - 1000)), 1000);" >"$scripts_dir/stream.sql"

one_round() { # one_round DATABASE CLIENTS SCRIPT: tps and latency (ms) of one pgbench run, each
    # after a checkpoint (neither system pays for the other's dirty pages)
    local database=$1 clients=$2 script=$3 out
    sql postgres -c CHECKPOINT
    local tps latency
    # (the database last, as pgbench takes it: its -d is --debug, a line per step of every
    # transaction, which cost the clients' CPU in runs before 2026-12-04 evening)
    out=$("$PGBIN/pgbench" -n -c "$clients" -j "$clients" -T "$seconds" \
        -f "$scripts_dir/$script" "$database" 2>&1) || { echo "$out" >&2; fail "pgbench failed on $database ($script)"; }
    tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
    latency=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' <<<"$out")
    [ -n "$tps" ] && [ -n "$latency" ] || { echo "$out" >&2; fail "no tps or latency from pgbench on $database ($script)"; }
    echo "$tps $latency"
}

results=bench/results/message_db.md
# (written here, moved over the results when the run is complete: a run that fails leaves them)
partial=$base/message_db.md
mkdir -p bench/results
{
    echo "#### message-db 1.3 vs chunked_map_message_store, one server, this machine ($(nproc) cores); pgbench, $rounds × $seconds s, medians"
    echo
    echo "Filled: $((category_size * 10)) messages in 10 categories (a category of $category_size), a stream of $stream_size."
    echo "Rounds interleaved (message-db, then the other side, then the other way round), a checkpoint before each; the ratio is the median of the rounds' ratios, their range in brackets. The other side is chunked_map_message_store unless the figure names another."
    echo
    echo "| figure | clients | message-db /s | the other /s | the other ÷ message-db | message-db ms | the other ms |"
    echo "|---|---|---|---|---|---|---|"
} | tee "$partial"
figure() { # figure LABEL CLIENTS SCRIPT [DATABASE SCRIPT]: message-db's SCRIPT against
    # chunked_map's, or against the second SCRIPT in DATABASE
    local theirs_tps=() theirs_ms=() ours_tps=() ours_ms=() ratios=() round tps ms
    local ours=${4:-chunked} our_script=${5:-$3}
    for round in $(seq "$rounds"); do
        local order=(theirs ours)
        [ $((round % 2)) = 1 ] || order=(ours theirs)
        for side in "${order[@]}"; do
            local measured
            if [ "$side" = theirs ]; then
                measured=$(one_round message_db "$2" "$3")
            else
                measured=$(one_round "$ours" "$2" "$our_script")
            fi
            read -r tps ms <<<"$measured"
            if [ "$side" = theirs ]; then
                theirs_tps+=("$tps") theirs_ms+=("$ms")
            else
                ours_tps+=("$tps") ours_ms+=("$ms")
            fi
        done
        ratios+=("$(awk -v a="${ours_tps[-1]}" -v b="${theirs_tps[-1]}" 'BEGIN { printf "%.2f", a / b }')")
    done
    local ratio low high
    ratio=$(printf '%s\n' "${ratios[@]}" | median)
    low=$(printf '%s\n' "${ratios[@]}" | sort -g | head -n 1)
    high=$(printf '%s\n' "${ratios[@]}" | sort -g | tail -n 1)
    echo "| $1 | $2 | $(printf '%s\n' "${theirs_tps[@]}" | median | xargs printf '%.0f') | $(printf '%s\n' "${ours_tps[@]}" | median | xargs printf '%.0f') | $ratio ($low–$high) | $(printf '%s\n' "${theirs_ms[@]}" | median) | $(printf '%s\n' "${ours_ms[@]}" | median) |" | tee -a "$partial"
}
figure "write_message, each client its own stream" 1 write.sql
figure "write_message, 8 streams of one category" 8 write_hot.sql
figure "stream_version, then write_message with it as the expected version, each client its own stream" 1 write_expected.sql
# what any write can do on this machine: a transaction of one INSERT of one row into a table
# with no index, from 8 clients, against message-db's 8 writers of one category (the message
# store's writes do that and more: an append, an index row, the order key)
figure "(ceiling) a bare one-row INSERT, no index, no message store, against message-db's 8 writers" 8 write_hot.sql postgres bare_insert.sql
# what message-db's own write does when its writers of different streams stop waiting for each
# other (its lock on the stream instead of the category), against the same write serialized
figure "(reference) message-db's own write_message, its lock on the stream instead of the category, against message-db's" 8 write_hot.sql message_db write_hot_stream_locked.sql
# the floor of a store written in PL/pgSQL, as write_message is: a write that updates a stream
# row and inserts one row of the message with two index entries, and the order key
# (bench/one_row_store.sql), filled as the others, against message-db's writers
figure "(floor) a store of one row a message, each client its own stream, against message-db's" 1 write.sql one_row write.sql
figure "(floor) a store of one row a message, 8 streams of one category, against message-db's" 8 write_hot.sql one_row write_hot.sql
# what no write_message on chunked_map's storage can beat, however written (in C or otherwise):
# the append of each message's record alone (chunked_register_with_id, as write_message calls
# it, through the direct write), with no index row, no order key and no PL/pgSQL, into streams of
# its own, against message-db's writers
figure "(the append alone) chunked_map's append of the message's record, no index row, no PL/pgSQL, each client its own stream, against message-db's" 1 write.sql chunked append_alone.sql
figure "(the append alone) the same, 8 streams, against message-db's 8 writers of one category" 8 write_hot.sql chunked append_alone.sql
# what the commit's flush costs message-db's serialized writers here (each holds the category's
# lock until its commit record is flushed): the same writes in a copy of its database whose
# commits do not wait for the flush (synchronous_commit off), against its own
figure "(flush) message-db's own write_message, its commits not waiting for the flush, against message-db's" 8 write_hot.sql message_db_unflushed write_hot.sql
figure "write_message then 1 ms of work before commit, 8 streams of one category" 8 write_hot_handler.sql
# (the writes above left messages without a global position: given now, outside the reads' time)
# (10,000 a numbering: until one numbers none)
sql chunked -c "DO \$\$ BEGIN LOOP EXIT WHEN message_store.number_messages() = 0; COMMIT; END LOOP; END \$\$" >/dev/null
figure "get_category_messages, 1,000 from a random position" 1 category.sql
figure "get_stream_messages, the last 1,000 of the stream" 1 stream.sql

# WAL a write leaves: the cluster's WAL position before and after 5,000 autocommit writes of one
# client to its own stream (made by the rounds above), after a checkpoint (so full-page images
# count as in the rounds: on a large store they make most of it, random message ids touching
# many index leaves in both systems); nothing else writes meanwhile but autovacuum
wal_per_write() { # wal_per_write DATABASE: bytes of WAL per write
    local database=$1 before
    sql postgres -c CHECKPOINT
    before=$(sql postgres -c "SELECT pg_catalog.pg_current_wal_insert_lsn()")
    "$PGBIN/pgbench" -n -c 1 -t 5000 -f "$scripts_dir/write.sql" "$database" >/dev/null 2>&1 ||
        fail "pgbench failed on $database (WAL per write)"
    sql postgres -c "SELECT pg_catalog.round(pg_catalog.pg_wal_lsn_diff(
                         pg_catalog.pg_current_wal_insert_lsn(), '$before') / 5000.0)"
}
theirs_wal=$(wal_per_write message_db)
ours_wal=$(wal_per_write chunked)
floor_wal=$(wal_per_write one_row)

# Instructions per write_message, counted by callgrind (wall-clock time on this machine moves with
# its neighbours; instructions do not): a single-user backend of the same cluster (stopped for
# it) runs N1, then N2 autocommit writes to one stream; (total(N2) - total(N1)) / (N2 - N1) is
# the cost of one write, the statement, its uuid and commit included.
command -v valgrind >/dev/null || as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind
scripts/pgcluster.sh stop "$base" >/dev/null
counted=$base/callgrind
mkdir -p "$counted"
if is_root; then chown postgres: "$counted"; fi
# a single-user backend of the stopped cluster; it does not take the database's settings, and
# message-db's functions call each other unqualified: its search_path given here, to both alike
single_user=("$PGBIN/postgres" --single -c search_path=message_store,public -D "$base/data")
instructions() { # instructions DATABASE N: callgrind's total for N writes
    local database=$1 n=$2
    for _ in $(seq "$n"); do
        echo "SELECT message_store.write_message(gen_random_uuid()::varchar, 'counted-1', 'Written', '{\"n\": 1}');"
    done >"$counted/$1-$2.sql"
    counted_total "$database" "$1-$2"
}
# the same, each write with the stream's version as its expected version (the version of the
# stream before the N writes given): as clients write an entity's events, after reading it
instructions_expected() { # instructions_expected DATABASE VERSION N
    local database=$1 version=$2 n=$3 i
    for i in $(seq "$n"); do
        echo "SELECT message_store.write_message(gen_random_uuid()::varchar, 'counted_expected-1', 'Written', '{\"n\": 1}', NULL, $((version + i - 1)));"
    done >"$counted/$1-expected-$3.sql"
    counted_total "$database" "$1-expected-$3"
}
counted_total() { # counted_total DATABASE NAME: callgrind's total for the statements in NAME.sql
    local database=$1 input=$counted/$2.sql
    chmod a+r "$input"
    # (a single-user backend goes on after an error and exits 0: its output is looked at)
    as_server_owner valgrind --tool=callgrind --callgrind-out-file="$counted/$2.out" \
        "${single_user[@]}" "$database" <"$input" >"$counted/$2.log" 2>&1
    ! grep -q -E '(ERROR|FATAL|PANIC):' "$counted/$2.log" ||
        fail "the writes counted in $database failed: $(grep -m 1 -E '(ERROR|FATAL|PANIC):' "$counted/$2.log")"
    summary "$counted/$2.out"
}
summary() { # summary CALLGRIND_OUT: its total of instructions
    local total
    total=$(sed -n 's/^summary: \([0-9]*\)$/\1/p' "$1")
    [ -n "$total" ] || fail "no summary in $1"
    echo "$total"
}
stream_version() { # stream_version DATABASE STREAM
    echo "SELECT message_store.stream_version('$2') AS version;" |
        as_server_owner "${single_user[@]}" "$1" 2>/dev/null |
        sed -n 's/^[[:space:]]*1: version = "\([0-9]*\)".*/\1/p'
}
per_write() { # per_write DATABASE (the stream started before either count)
    local low high version
    instructions "$1" 1 >/dev/null
    low=$(instructions "$1" 100)
    high=$(instructions "$1" 300)
    # (every write counted is in the stream: positions 0 to 400)
    version=$(stream_version "$1" counted-1)
    [ "$version" = 400 ] || fail "the writes counted in $1 are not all in the stream: its version is '$version', not 400"
    echo $(((high - low) / 200))
}
per_write_expected() { # per_write_expected DATABASE: as per_write, each write with its expected version
    local low high version
    instructions_expected "$1" -1 1 >/dev/null
    low=$(instructions_expected "$1" 0 100)
    high=$(instructions_expected "$1" 100 300)
    version=$(stream_version "$1" counted_expected-1)
    [ "$version" = 400 ] || fail "the writes counted in $1 with an expected version are not all in the stream: its version is '$version', not 400"
    echo $(((high - low) / 200))
}
# chunked_map gives a message its global position after the write, in the numbering a category
# read runs (message-db in the write): its cost per message, counted the same way, numbering N1,
# then N2 messages just written (written uncounted).
numbering() { # numbering N: callgrind's total for one numbering of N messages written just before
    local n=$1 writes=$counted/numbered-$1.sql input=$counted/numbering-$1.sql
    for i in $(seq "$n"); do
        echo "SELECT message_store.write_message(gen_random_uuid()::varchar, 'numbered-$((i % 50))', 'Written', '{\"n\": 1}');"
    done >"$writes"
    echo "SELECT message_store.number_messages() AS numbered;" >"$input"
    chmod a+r "$writes" "$input"
    as_server_owner "${single_user[@]}" chunked <"$writes" >/dev/null 2>&1
    local numbered
    numbered=$(as_server_owner valgrind --tool=callgrind --callgrind-out-file="$counted/numbering-$n.out" \
        "${single_user[@]}" chunked <"$input" 2>/dev/null |
        sed -n 's/^[[:space:]]*1: numbered = "\([0-9]*\)".*/\1/p')
    [ "$n" = 1 ] || [ "$numbered" = "$n" ] || fail "the numbering counted gave $numbered positions, not $n"
    summary "$counted/numbering-$n.out"
}
per_numbered() {
    local low high
    numbering 1 >/dev/null # (what the writes above left)
    low=$(numbering 200)
    high=$(numbering 1000)
    echo $(((high - low) / 800))
}
theirs=$(per_write message_db)
ours=$(per_write chunked)
floor=$(per_write one_row)
theirs_expected=$(per_write_expected message_db)
ours_expected=$(per_write_expected chunked)
numbered=$(per_numbered)
{
    echo
    echo "Instructions per autocommit write_message (callgrind, single-user backend, uuid and commit included): message-db $theirs, chunked_map $ours ($(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }')×)."
    echo "The same, each write with its expected version (the stream's version): message-db $theirs_expected, chunked_map $ours_expected ($(awk -v a="$ours_expected" -v b="$theirs_expected" 'BEGIN { printf "%.2f", a / b }')×)."
    echo "WAL per autocommit write_message (one client, 5,000 writes to its own stream, after a checkpoint): message-db $theirs_wal bytes, chunked_map $ours_wal bytes ($(awk -v a="$ours_wal" -v b="$theirs_wal" 'BEGIN { printf "%.2f", a / b }')×)."
    echo "The floor, a store of one row a message (bench/one_row_store.sql): instructions per write $floor ($(awk -v a="$floor" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }')× message-db's), WAL per write $floor_wal bytes ($(awk -v a="$floor_wal" -v b="$theirs_wal" 'BEGIN { printf "%.2f", a / b }')×)."
    echo "chunked_map's numbering, per message (a global position given after commit, by a read; message-db gives it in the write): $numbered; write and numbering: $((ours + numbered)) ($(awk -v a="$((ours + numbered))" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }')× message-db's write)."
} | tee -a "$partial"
mv "$partial" "$results"
echo
echo "written to $results"
