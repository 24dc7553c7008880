# Sourced first by every script that works on one PostgreSQL version: takes `--pg N` (N: 15, the
# default, 16, 17 or 18) from the front of the script's arguments, as PG_MAJOR=N in the
# environment does, and refuses a version the project does not support. Then scripts/lib.sh.
if [ "${1:-}" = --pg ]; then
    if [ $# -lt 2 ]; then
        echo "$(basename "$0"): --pg needs a version: 15, 16, 17 or 18" >&2
        exit 2
    fi
    export PG_MAJOR=$2
    shift 2
fi
case "${PG_MAJOR:-15}" in
15 | 16 | 17 | 18) ;;
*)
    echo "$(basename "$0"): PostgreSQL ${PG_MAJOR} is not supported: 15, 16, 17 or 18" >&2
    exit 2
    ;;
esac
