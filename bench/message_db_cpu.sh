#!/usr/bin/env bash
# Where one writer's time goes, chunked_map_message_store against message-db 1.3 (from npm,
# tests/message_db), on one throw-away cluster whose commits do not wait for the flush
# (synchronous_commit off: what is left is CPU): per autocommit write_message of one client to
# its own stream, the CPU time of the whole server (every postgres process: the client's
# backend, autovacuum, the WAL writer, ...; from /proc, the postmaster's reaped children
# included) and the wall-clock time. ROUNDS rounds of WRITES writes for each system,
# interleaved, each after a checkpoint; medians, ratio per round. Prints a markdown table.
# Usage: bench/message_db_cpu.sh [ROUNDS] [WRITES]   (default 5 rounds of 20000 writes)
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/../scripts/lib.sh"
cd "$REPO_ROOT"

rounds=${1:-5}
writes=${2:-20000}
source bench/side_by_side.sh
side_by_side_server "/tmp/chunked_map-message-db-cpu-$$" 26620 -c max_connections=20 -c shared_buffers=512MB \
    -c synchronous_commit=off
base=$SIDE_BY_SIDE_BASE
script=$base/write.sql
echo "SELECT message_store.write_message(gen_random_uuid()::varchar, 'one-' || :client_id, 'Written', '{\"n\": 1}');" >"$script"

postmaster=$(head -n 1 "$base/data/postmaster.pid")
ticks_per_second=$(getconf CLK_TCK)
server_ticks() { # CPU ticks of the server so far: the postmaster, its reaped children, its live ones
    local ticks child
    ticks=$(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$postmaster/stat")
    for child in $(pgrep -P "$postmaster"); do
        # (a child that ended meanwhile is counted with the reaped ones)
        ticks=$((ticks + $(awk '{ print $14 + $15 }' "/proc/$child/stat" 2>/dev/null || echo 0)))
    done
    echo "$ticks"
}
one_round() { # one_round DATABASE: server CPU µs and wall µs per write
    local database=$1 before after start end
    sql postgres -c CHECKPOINT
    before=$(server_ticks)
    start=$(date +%s%N)
    "$PGBIN/pgbench" -n -c 1 -t "$writes" -f "$script" "$database" >"$base/pgbench.log" 2>&1 ||
        { cat "$base/pgbench.log" >&2; fail "pgbench failed on $database"; }
    end=$(date +%s%N)
    # (the client's backend ends with pgbench: wait until the postmaster has reaped it)
    while [ "$(pgrep -P "$postmaster" -f "postgres: postgres $database" | wc -l)" != 0 ]; do sleep 0.1; done
    after=$(server_ticks)
    awk -v a="$after" -v b="$before" -v s="$start" -v e="$end" -v n="$writes" -v t="$ticks_per_second" \
        'BEGIN { printf "%.1f %.1f\n", (a - b) / t / n * 1e6, (e - s) / 1e3 / n }'
}

# (a first round each, not counted: the backends' caches and the streams' first pages)
one_round message_db >/dev/null
one_round chunked >/dev/null
theirs_cpu=() theirs_wall=() ours_cpu=() ours_wall=() cpu_ratios=()
for round in $(seq "$rounds"); do
    order=(message_db chunked)
    [ $((round % 2)) = 1 ] || order=(chunked message_db)
    for database in "${order[@]}"; do
        read -r cpu wall <<<"$(one_round "$database")"
        if [ "$database" = message_db ]; then
            theirs_cpu+=("$cpu") theirs_wall+=("$wall")
        else
            ours_cpu+=("$cpu") ours_wall+=("$wall")
        fi
    done
    cpu_ratios+=("$(awk -v a="${ours_cpu[-1]}" -v b="${theirs_cpu[-1]}" 'BEGIN { printf "%.2f", a / b }')")
done
echo "#### One writer, commits not waiting for the flush: $rounds rounds of $writes writes, interleaved, medians ($(nproc) cores)"
echo
echo "| system | server CPU µs a write | wall µs a write |"
echo "|---|---|---|"
echo "| message-db 1.3 | $(printf '%s\n' "${theirs_cpu[@]}" | median) | $(printf '%s\n' "${theirs_wall[@]}" | median) |"
echo "| chunked_map_message_store | $(printf '%s\n' "${ours_cpu[@]}" | median) | $(printf '%s\n' "${ours_wall[@]}" | median) |"
echo
echo "chunked_map's server CPU ÷ message-db's, per round: ${cpu_ratios[*]} (median $(printf '%s\n' "${cpu_ratios[@]}" | median))."
