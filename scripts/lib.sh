# Shared by the project's scripts: where PostgreSQL 15 lives and how to run its server
# as a user that is not root.
PG_MAJOR=15
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/$PG_MAJOR/bin/pg_config}
PGBIN=${PGBIN:-/usr/lib/postgresql/$PG_MAJOR/bin}
PGRX_VERSION=0.18.1
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

is_root() { [ "$(id -u)" = 0 ]; }

# Runs a command as root: directly when we are root, through sudo otherwise.
as_root() { if is_root; then "$@"; else sudo "$@"; fi; }

# PostgreSQL refuses to run as root: as root, the server runs as user postgres.
as_server_owner() { if is_root; then runuser -u postgres -- "$@"; else "$@"; fi; }

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
