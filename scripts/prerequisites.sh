#!/usr/bin/env bash
# Installs what building and testing chunked_map for $PG_MAJOR needs, skipping what is already
# there: Debian packages (that PostgreSQL with its server headers where Debian has it, clang for
# bindgen, the client examples' toolchains on this machine), the PostgreSQL 16 wheel
# (scripts/pg16.sh), cargo-pgrx at the pinned version, and `cargo pgrx init` for $PG_MAJOR.
# Inside a chroot of scripts/chroot.sh, only what the chroot does not have yet.
# Usage: scripts/prerequisites.sh [--pg N]
set -euo pipefail
source "$(dirname "$0")/pg-option.sh"
source "$(dirname "$0")/lib.sh"
refuse_arguments "scripts/prerequisites.sh [--pg N]" "$@"

in_chroot=false
[ -f /etc/chunked_map-chroot ] && in_chroot=true
if [ "$PG_MAJOR" != 15 ] && [ "$PG_MAJOR" != 16 ] && ! $in_chroot; then
    echo "PostgreSQL $PG_MAJOR comes from Debian $(debian_suite "$PG_MAJOR" || echo '?'): run this in its chroot (scripts/chroot.sh run $PG_MAJOR ...)" >&2
    exit 2
fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
packages=(build-essential pkg-config clang libclang-dev sudo bzip2 xz-utils)
if [ "$PG_MAJOR" != 16 ] || $in_chroot; then
    packages+=(postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR postgresql-client-$PG_MAJOR)
fi
missing=()
for package in "${packages[@]}"; do
    installed "$package" || missing+=("$package")
done
if ! $in_chroot; then
    # The client examples' tests need Python (with venv) and Node.js (with npm); the machine's own
    # are used when present, Debian's installed otherwise. Go and Java come from Debian, with their
    # PostgreSQL drivers (Go modules and Maven are not reachable): pgx v4 and pgjdbc; Diesel needs
    # libpq; the package tests need debootstrap.
    python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3 python3-venv)
    command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
    for package in golang-go golang-github-jackc-pgx-v4-dev default-jdk-headless libpostgresql-jdbc-java \
                   libpq-dev debootstrap; do
        installed "$package" || missing+=("$package")
    done
fi
if [ ${#missing[@]} -gt 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Check-Valid-Until=false update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ "$PG_MAJOR" = 16 ] && ! $in_chroot; then
    "$REPO_ROOT/scripts/pg16.sh" >/dev/null
fi

if ! cargo pgrx --version 2>/dev/null | grep -q "$PGRX_VERSION"; then
    log "installing cargo-pgrx $PGRX_VERSION (several minutes, once)"
    cargo install cargo-pgrx --version "$PGRX_VERSION" --locked
fi

pgrx_home=${PGRX_HOME:-$HOME/.pgrx}
if ! grep -qs "pg$PG_MAJOR = \"$PG_CONFIG\"" "$pgrx_home/config.toml"; then
    log "cargo pgrx init --pg$PG_MAJOR $PG_CONFIG"
    cargo pgrx init --pg$PG_MAJOR "$PG_CONFIG"
fi
