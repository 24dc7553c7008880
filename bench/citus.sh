#!/usr/bin/env bash
# chunked_map on a Citus cluster, side by side with a single node, on this machine: a
# coordinator and two workers on loopback (throw-away clusters), chunked_map distributed with
# chunked_distribute(), and a single-node cluster with the same extension. Prints a markdown
# table of medians and writes it to bench/results/citus.md. Citus is not part of the project:
# where it is not installed in PostgreSQL 15, this says so and exits 0.
# Usage: bench/citus.sh [ROUNDS] [SECONDS]      (default 3 rounds of 5 s per figure)
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
cd "$REPO_ROOT"

rounds=${1:-3}
seconds=${2:-5}
control="$("$PG_CONFIG" --sharedir)/extension/citus.control"
if [ ! -f "$control" ]; then
    echo "Citus benchmark skipped: Citus is not installed in PostgreSQL 15 ($control not found)"
    exit 0
fi
scripts/prerequisites.sh >/dev/null
scripts/install-extension.sh --release >/dev/null

base=/tmp/chunked_map-citus-bench-$$
ports=(26500 26501 26502 26503) # coordinator, worker 1, worker 2, single node
names=(coordinator worker1 worker2 single)
db=bench
cleanup() {
    for name in "${names[@]}"; do
        scripts/pgcluster.sh stop "$base/$name" >/dev/null 2>&1 || true
    done
    rm -rf "$base"
}
trap cleanup EXIT

for i in 0 1 2 3; do
    preload="shared_preload_libraries='citus,chunked_map'"
    [ "$i" = 3 ] && preload="shared_preload_libraries='chunked_map'"
    scripts/pgcluster.sh start "$base/${names[$i]}" "${ports[$i]}" -c "$preload" \
        -c max_prepared_transactions=100 -c max_connections=200 -c citus.enable_stat_counters=on
done
sql() { # sql PORT STATEMENT...
    local port=$1
    shift
    "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d "$db" "$@"
}
for i in 0 1 2 3; do
    "$PGBIN/psql" -X -q -h 127.0.0.1 -p "${ports[$i]}" -U postgres -d postgres -c "CREATE DATABASE $db"
    [ "$i" = 3 ] || sql "${ports[$i]}" -c "CREATE EXTENSION citus"
done
sql "${ports[0]}" -c "SELECT citus_set_coordinator_host('127.0.0.1', ${ports[0]})" \
    -c "SELECT citus_add_node('127.0.0.1', ${ports[1]})" \
    -c "SELECT citus_add_node('127.0.0.1', ${ports[2]})" \
    -c "CREATE EXTENSION chunked_map" -c "SELECT chunked_map.chunked_distribute()" >/dev/null
sql "${ports[3]}" -c "CREATE EXTENSION chunked_map"
for port in "${ports[0]}" "${ports[3]}"; do
    sql "$port" -c "SELECT count(chunked_map.chunked_start(m)) FROM
        (SELECT 'lat' UNION ALL SELECT 'tx' UNION ALL SELECT 'hot' UNION ALL
         SELECT 'map' || n FROM generate_series(1, 8) AS n) AS maps(m)" >/dev/null
    # the role the hot-map runs with a lock wait connect as: ALTER ROLE ... SET reaches every node
    sql "$port" -c "CREATE ROLE patient LOGIN SUPERUSER" \
        -c "ALTER ROLE patient SET chunked_map.lock_timeout = '50ms'"
done
# the node that holds map 'lat' (and the other one) for the through-a-worker figures
holder() { # the port of the worker holding map $1
    sql "${ports[0]}" -c "SELECT n.nodeport FROM pg_dist_shard AS s
        JOIN pg_dist_placement AS p ON p.shardid = s.shardid JOIN pg_dist_node AS n ON n.groupid = p.groupid
        WHERE s.shardid = get_shard_id_for_distribution_column('chunked_map.map_state', '$1')"
}
lat_port=$(holder lat)
hot_port=$(holder hot)
other_port=${ports[1]}
[ "$lat_port" = "${ports[1]}" ] && other_port=${ports[2]}

scripts_dir=$base/scripts
mkdir -p "$scripts_dir"
echo "SELECT chunked_map.chunked_register('lat', '{\"n\": 1}');" >"$scripts_dir/one.sql"
printf 'BEGIN;\nSELECT chunked_map.chunked_register('"'"'tx'"'"', '"'"'{"n": 1}'"'"');\nCOMMIT;\n' >"$scripts_dir/tx.sql"
echo "SELECT chunked_map.chunked_register('map' || :client_id % 8 + 1, '{\"n\": 1}');" >"$scripts_dir/own.sql"
echo "SELECT chunked_map.chunked_register('hot', '{\"n\": 1}');" >"$scripts_dir/hot.sql"

# run NAME PORT USER CLIENTS SCRIPT: one pgbench run; prints "tps latency_ms retries failed"
run() {
    local port=$2 user=$3 clients=$4 script=$5
    local out
    # (the database last: pgbench's -d is --debug)
    out=$("$PGBIN/pgbench" -n -h 127.0.0.1 -p "$port" -U "$user" -c "$clients" -j "$clients" \
        -T "$seconds" --max-tries=0 -f "$scripts_dir/$script" "$db" 2>&1)
    local tps latency retries failed
    tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
    latency=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' <<<"$out")
    retries=$(sed -n 's/^total number of retries: \([0-9]*\).*/\1/p' <<<"$out")
    failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
    echo "$tps $latency ${retries:-0} ${failed:-0}"
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
connections() { # connections the coordinator opened to other nodes so far
    sql "${ports[0]}" -c "SELECT coalesce(sum(connection_establishment_succeeded), 0)
                          FROM citus_stat_counters(0)"
}

results=bench/results/citus.md
mkdir -p bench/results
{
    echo "#### Citus: coordinator + 2 workers on loopback vs a single node, this machine ($(nproc) cores); pgbench, ${rounds} × ${seconds} s, medians"
    echo
    echo "| figure | where clients connect | clients | appends/s | latency ms | retries (40001) per run | coordinator connections opened per run |"
    echo "|---|---|---|---|---|---|---|"
} >"$results"
figure() { # figure LABEL WHERE PORT USER CLIENTS SCRIPT
    local label=$1 where=$2 port=$3 user=$4 clients=$5 script=$6
    local tps=() lat=() retries=() conns=()
    for _ in $(seq "$rounds"); do
        local before after line
        before=$(connections)
        line=$(run "$label" "$port" "$user" "$clients" "$script")
        after=$(connections)
        read -r t l r _ <<<"$line"
        tps+=("$t")
        lat+=("$l")
        retries+=("$r")
        conns+=("$((after - before))")
    done
    local row
    row="| $label | $where | $clients | $(printf '%s\n' "${tps[@]}" | median | xargs printf '%.0f') | $(printf '%s\n' "${lat[@]}" | median) | $(printf '%s\n' "${retries[@]}" | median) | $(printf '%s\n' "${conns[@]}" | median) |"
    echo "$row" | tee -a "$results"
}

figure "one append per call" "single node" "${ports[3]}" postgres 1 one.sql
figure "one append per call" "coordinator (delegated to the worker)" "${ports[0]}" postgres 1 one.sql
figure "one append per call" "the worker holding the map" "$lat_port" postgres 1 one.sql
figure "one append per call" "the other worker" "$other_port" postgres 1 one.sql
figure "BEGIN; append; COMMIT (not delegated)" "single node" "${ports[3]}" postgres 1 tx.sql
figure "BEGIN; append; COMMIT (not delegated)" "coordinator" "${ports[0]}" postgres 1 tx.sql
figure "8 maps, one per client" "single node" "${ports[3]}" postgres 8 own.sql
figure "8 maps, one per client" "coordinator" "${ports[0]}" postgres 8 own.sql
figure "1 hot map, never waiting (retry 40001)" "single node" "${ports[3]}" postgres 8 hot.sql
figure "1 hot map, never waiting (retry 40001)" "coordinator" "${ports[0]}" postgres 8 hot.sql
figure "1 hot map, never waiting (retry 40001)" "the worker holding the map" "$hot_port" postgres 8 hot.sql
figure "1 hot map, lock_timeout 50ms (ALTER ROLE)" "single node" "${ports[3]}" patient 8 hot.sql
figure "1 hot map, lock_timeout 50ms (ALTER ROLE)" "coordinator" "${ports[0]}" patient 8 hot.sql
figure "1 hot map, lock_timeout 50ms (ALTER ROLE)" "the worker holding the map" "$hot_port" patient 8 hot.sql

# The feed (0.5): a poll of 100 records through the coordinator, 10 from each of 10 maps, and
# its commit (two-phase across the workers it touched); the maps on one worker, or 5 on each.
# Each pgbench transaction first appends 10 records to each map (not measured), then polls
# them; pgbench -r gives each statement's latency.
pick_maps() { # pick_maps PREFIX PORT COUNT: the first COUNT names PREFIX-i held by the worker on PORT
    sql "${ports[0]}" -c "SELECT string_agg(x.m, ' ') FROM (
        SELECT c.m FROM (SELECT i, '$1-' || i AS m FROM generate_series(1, 1000) AS i) AS c
        JOIN pg_dist_placement AS p
          ON p.shardid = get_shard_id_for_distribution_column('chunked_map.map_state', c.m)
        JOIN pg_dist_node AS n ON n.groupid = p.groupid
        WHERE n.nodeport = $2 ORDER BY c.i LIMIT $3) AS x"
}
feed_script() { # feed_script CONSUMER MAP...: writes $scripts_dir/poll_CONSUMER.sql
    local consumer=$1
    shift
    local array
    array="ARRAY['$(sed "s/ /', '/g" <<<"$*")']"
    {
        echo "SELECT count(*) FROM unnest($array) AS m, LATERAL chunked_map.chunked_register_many(m, ARRAY(SELECT '{\"n\": 1}'::jsonb FROM generate_series(1, 10))) AS r;"
        echo "BEGIN;"
        echo "SELECT count(*) FROM chunked_map.chunked_poll('$consumer', 100);"
        echo "COMMIT;"
    } >"$scripts_dir/poll_$consumer.sql"
}
read -r -a one_maps <<<"$(pick_maps one "${ports[1]}" 10)"
read -r -a two_maps <<<"$(pick_maps two "${ports[1]}" 5) $(pick_maps two "${ports[2]}" 5)"
solo_maps=(solo-{1..10})
start_and_subscribe() { # PORT CONSUMER MAP...
    local port=$1 consumer=$2
    shift 2
    for map in "$@"; do
        sql "$port" -c "SELECT chunked_map.chunked_start('$map')" >/dev/null
    done
    sql "$port" -c "SELECT chunked_map.chunked_subscribe('$consumer', '$consumer')" >/dev/null
    feed_script "$consumer" "$@"
}
start_and_subscribe "${ports[0]}" one "${one_maps[@]}"
start_and_subscribe "${ports[0]}" two "${two_maps[@]}"
start_and_subscribe "${ports[3]}" solo "${solo_maps[@]}"
statement_ms() { # statement_ms PATTERN <pgbench -r output: the latency of the statement matching PATTERN
    awk -v pattern="$1" '$1 ~ /^[0-9.]+$/ && index($0, pattern) { print $1; exit }'
}
{
    echo
    echo "#### The feed: a poll of 100 records (10 maps × 10) through the coordinator, and its commit; pgbench -r, 1 client, ${rounds} × ${seconds} s, medians"
    echo
    echo "| maps held by | poll ms | commit ms | polls/s (with the appends before each) |"
    echo "|---|---|---|---|"
} | tee -a "$results"
poll_figure() { # poll_figure LABEL PORT CONSUMER
    local label=$1 port=$2 consumer=$3
    local polls=() commits=() tps=()
    for _ in $(seq "$rounds"); do
        local out
        out=$("$PGBIN/pgbench" -n -r -h 127.0.0.1 -p "$port" -U postgres -c 1 -j 1 \
            -T "$seconds" -f "$scripts_dir/poll_$consumer.sql" "$db" 2>&1)
        polls+=("$(statement_ms "chunked_poll(" <<<"$out")")
        commits+=("$(statement_ms "COMMIT;" <<<"$out")")
        tps+=("$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")")
        echo "$out" >"$base/pgbench-$consumer.out"
    done
    # every poll took what the appends before it made: nothing left behind
    local behind
    behind=$(sql "$port" -c "SELECT records_behind FROM chunked_map.consumers WHERE consumer = '$consumer'")
    if [ "$behind" != 0 ]; then
        echo "consumer $consumer is $behind records behind: the polls did not take 100 each" >&2
        exit 1
    fi
    echo "| $label | $(printf '%s\n' "${polls[@]}" | median) | $(printf '%s\n' "${commits[@]}" | median) | $(printf '%s\n' "${tps[@]}" | median | xargs printf '%.0f') |" |
        tee -a "$results"
}
poll_figure "one worker (coordinator)" "${ports[0]}" one
poll_figure "two workers, 5 maps each (coordinator)" "${ports[0]}" two
poll_figure "single node" "${ports[3]}" solo
echo
echo "written to $results"
