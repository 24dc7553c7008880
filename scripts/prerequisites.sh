#!/usr/bin/env bash
# Installs what building and testing chunked_map needs, skipping what is already there:
# Debian packages (PostgreSQL 15 with its server headers, clang for bindgen), cargo-pgrx
# at the pinned version, and `cargo pgrx init` against the system PostgreSQL 15.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

packages=(build-essential pkg-config clang libclang-dev sudo bzip2 xz-utils
          postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR postgresql-client-$PG_MAJOR)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$package")
done
# The client examples' tests need Python (with venv) and Node.js (with npm); the machine's own
# are used when present, Debian's installed otherwise. Go and Java come from Debian, with their
# PostgreSQL drivers (Go modules and Maven are not reachable): pgx v4 and pgjdbc; Diesel needs
# libpq; the package test needs debootstrap.
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3 python3-venv)
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
for package in golang-go golang-github-jackc-pgx-v4-dev default-jdk-headless libpostgresql-jdbc-java \
               libpq-dev debootstrap; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
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
