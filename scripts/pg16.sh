#!/usr/bin/env bash
# PostgreSQL 16, which no Debian suite ships: PyPI's pgserver 0.1.4 wheel carries a relocatable
# PostgreSQL 16.2 (server, psql, pg_dump, pg_config, the server headers, PGXS with pg_regress and
# pg_isolation_regress). It is downloaded once and unpacked under $CACHE_DIR/pg16 in the wheel's
# own layout (its programs find their libraries through $ORIGIN/../../../pgserver.libs), readable
# by the server's user. The extension is installed into it like into any PostgreSQL.
# Prints the path of its pg_config. Usage: scripts/pg16.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
refuse_arguments "scripts/pg16.sh" "$@"

version=0.1.4
root=$CACHE_DIR/pg16
if [ ! -x "$PG16_ROOT/bin/pg_config" ] || [ ! -f "$root/.unpacked-$version" ]; then
    log "PostgreSQL 16: PyPI's pgserver $version wheel (once)"
    mkdir -p "$root/download"
    # pip from a virtual environment of its own where the machine's Python has none (Debian's
    # python3 comes without pip; python3-venv brings ensurepip)
    python=python3
    if ! python3 -m pip --version >/dev/null 2>&1; then
        [ -x "$root/venv/bin/python" ] || python3 -m venv "$root/venv" >&2
        python=$root/venv/bin/python
    fi
    "$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --python-version 3.11 --platform manylinux2014_x86_64 \
        -d "$root/download" "pgserver==$version" >&2
    wheel=$(ls "$root"/download/pgserver-"$version"-*.whl | head -n 1)
    rm -rf "$root/pgserver" "$root/pgserver.libs"
    # unzip keeping the files' modes (the programs must stay executable)
    python3 - "$wheel" "$root" <<'PY'
import os, sys, zipfile
wheel, root = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        path = z.extract(info, root)
        mode = (info.external_attr >> 16) & 0o777
        if mode:
            os.chmod(path, mode)
PY
    touch "$root/.unpacked-$version"
fi
# as root the server runs as user postgres: it must reach the installation and its libraries
if is_root; then
    chmod -R a+rX "$root"
    dir=$root
    while [ "$dir" != / ]; do
        chmod a+x "$dir"
        dir=$(dirname "$dir")
    done
fi
echo "$PG16_ROOT/bin/pg_config"
