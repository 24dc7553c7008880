# Shared by the project's scripts: where PostgreSQL 15 lives and how to run its server
# as a user that is not root.
PG_MAJOR=15
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/$PG_MAJOR/bin/pg_config}
PGBIN=${PGBIN:-/usr/lib/postgresql/$PG_MAJOR/bin}
PGXS_DIR=${PGXS_DIR:-/usr/lib/postgresql/$PG_MAJOR/lib/pgxs}
PGRX_VERSION=0.18.1
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# What the scripts fetch (source packages, chroots' downloads) is cached here, outside the clone.
CACHE_DIR=${CHUNKED_MAP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/chunked_map}

is_root() { [ "$(id -u)" = 0 ]; }

# Runs a command as root: directly when we are root, through sudo otherwise.
as_root() { if is_root; then "$@"; else sudo "$@"; fi; }

# PostgreSQL refuses to run as root: as root, the server runs as user postgres.
as_server_owner() { if is_root; then runuser -u postgres -- "$@"; else "$@"; fi; }

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
