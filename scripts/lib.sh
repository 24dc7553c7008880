# Shared by the project's scripts: which PostgreSQL, where it lives, where builds and downloads
# go, and how to run a server as a user that is not root.
#
# PG_MAJOR selects the PostgreSQL every script builds for, tests against and packages for
# (default 15: this machine's Debian 12 server). Where each comes from:
#   15  Debian 12's packages, on this machine
#   16  PyPI's pgserver 0.1.4 wheel, a relocatable PostgreSQL 16.2, unpacked under $CACHE_DIR
#       (scripts/pg16.sh); no Debian suite ships 16
#   17  Debian 13 "trixie", in a chroot (scripts/chroot.sh)
#   18  Debian "forky", in a chroot
# Inside a chroot the scripts run with that PG_MAJOR and find the server where Debian puts it.

is_root() { [ "$(id -u)" = 0 ]; }

# Runs a command as root: directly when we are root, through sudo otherwise.
as_root() { if is_root; then "$@"; else sudo "$@"; fi; }

# PostgreSQL refuses to run as root: as root, the server runs as user postgres.
as_server_owner() { if is_root; then runuser -u postgres -- "$@"; else "$@"; fi; }

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_MAJOR=${PG_MAJOR:-15}
PGRX_VERSION=0.18.1

# What the scripts fetch (source packages, the PostgreSQL 16 wheel, chroots and their packages)
# is cached here, outside the clone. As root it is a system directory, which the server's user
# (postgres) can read: the PostgreSQL 16 wheel and the regression suite run from it.
if is_root; then
    CACHE_DIR=${CHUNKED_MAP_CACHE:-/var/cache/chunked_map}
else
    CACHE_DIR=${CHUNKED_MAP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/chunked_map}
fi

# The PostgreSQL 16 wheel's installation (see scripts/pg16.sh).
PG16_ROOT=$CACHE_DIR/pg16/pgserver/pginstall

if [ "$PG_MAJOR" = 16 ] && [ ! -f /etc/chunked_map-chroot ]; then
    PG_CONFIG=${PG_CONFIG:-$PG16_ROOT/bin/pg_config}
    PGXS_DIR=${PGXS_DIR:-$PG16_ROOT/lib/postgresql/pgxs}
else
    PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/$PG_MAJOR/bin/pg_config}
    PGXS_DIR=${PGXS_DIR:-/usr/lib/postgresql/$PG_MAJOR/lib/pgxs}
fi
PGBIN=${PGBIN:-$(dirname "$PG_CONFIG")}

# One target directory per PostgreSQL version (15 keeps cargo's default).
if [ "$PG_MAJOR" = 15 ]; then
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO_ROOT/target}
else
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO_ROOT/target/pg$PG_MAJOR}
fi

# What the cluster tests (tests/cluster) need to find this PostgreSQL.
export CHUNKED_MAP_PGBIN=$PGBIN CHUNKED_MAP_PGXS=$PGXS_DIR CHUNKED_MAP_PG_MAJOR=$PG_MAJOR

# The Debian suite that ships each PostgreSQL (none for 16).
debian_suite() {
    case $1 in
    15) echo bookworm ;;
    17) echo trixie ;;
    18) echo forky ;;
    *) return 1 ;;
    esac
}

# Refuses arguments a script does not take: `refuse_arguments "USAGE" "$@"` after the script has
# taken its own.
refuse_arguments() {
    local usage=$1
    shift
    if [ $# -gt 0 ]; then
        echo "$(basename "$0"): unexpected argument '$1'; usage: $usage" >&2
        exit 2
    fi
}
