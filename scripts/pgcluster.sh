#!/usr/bin/env bash
# A throw-away PostgreSQL cluster ($PG_MAJOR, scripts/lib.sh) in DIR: its own data directory, port and socket
# directory (DIR itself), owned by user postgres when run as root. Superuser: postgres.
#   pgcluster.sh start DIR PORT [-c name=value ...]   initdb (first time) and start
#   pgcluster.sh stop DIR [fast|immediate]            stop (a crash, with immediate)
#   pgcluster.sh restart DIR                          start again after a stop
set -euo pipefail
source "$(dirname "$0")/lib.sh"

command=${1:?usage: pgcluster.sh start|stop|restart DIR ...}
dir=${2:?cluster directory}
case "$command" in
start)
    port=${3:?port}
    shift 3
    mkdir -p "$dir"
    is_root && chown postgres: "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        as_server_owner "$PGBIN/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 \
            --locale=C.UTF-8 --no-sync >"$dir/initdb.log"
        {
            echo "port = $port"
            echo "unix_socket_directories = '$dir'"
            echo "listen_addresses = '127.0.0.1'"
            for setting in "$@"; do
                [ "$setting" = "-c" ] || echo "${setting/=/ = }"
            done
        } | as_server_owner tee -a "$dir/data/postgresql.auto.conf" >/dev/null
    fi
    as_server_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
    ;;
restart)
    as_server_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
    ;;
stop)
    mode=${3:-fast}
    # (up to 5 min: after an immediate stop's SIGKILL a child of a busy server once took 55 s
    # to go, and pg_ctl's 60 s ran out a moment before the server was down)
    as_server_owner "$PGBIN/pg_ctl" -D "$dir/data" -m "$mode" -w -t 300 stop >/dev/null
    ;;
*)
    echo "unknown command $command" >&2
    exit 2
    ;;
esac
