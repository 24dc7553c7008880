#!/usr/bin/env bash
# Installs the Debian package (scripts/package.sh) on a Debian 12 that has PostgreSQL 15 and no
# Rust, no compiler, no build tools: a minimal debootstrap chroot, made once and cached under
# target/package-test/ (about 5 minutes the first time). In it, as an operator would:
#   - dpkg -i the package; CREATE EXTENSION; the psql demo's calls;
#   - a database of 0.1.0 (the oldest installable version) holding what that release wrote
#     (tests/fixtures): ALTER EXTENSION chunked_map UPDATE, every page byte-identical after;
#   - apt-get remove the package: the database's data is still there.
# Needs root (debootstrap, chroot, mounts): run as root or with passwordless sudo.
# Usage: tests/package/run.sh
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
cd "$REPO_ROOT"

deb=$(scripts/package.sh | tail -n 1)
work="$REPO_ROOT/target/package-test"
root="$work/bookworm"
mkdir -p "$work"

if [ ! -f "$root/.chunked_map-chroot-ready" ]; then
    dpkg-query -W -f='${Status}' debootstrap 2>/dev/null | grep -q "install ok installed" ||
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap
    log "debootstrap: a minimal Debian 12 with PostgreSQL 15 in $root (once)"
    as_root rm -rf "$root"
    as_root debootstrap --variant=minbase --include=postgresql-15 bookworm "$root" \
        http://deb.debian.org/debian > "$work/debootstrap.log"
    as_root touch "$root/.chunked_map-chroot-ready"
fi

mounted=()
cleanup() {
    as_root chroot "$root" /bin/sh -c \
        'test -f /var/tmp/cm/data/postmaster.pid && su postgres -c "/usr/lib/postgresql/15/bin/pg_ctl -D /var/tmp/cm/data -m immediate stop"' \
        >/dev/null 2>&1 || true
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do as_root umount "${mounted[$i]}" || true; done
}
trap cleanup EXIT
for mount in proc dev/shm; do
    as_root mkdir -p "$root/$mount"
done
as_root mount -t proc proc "$root/proc" && mounted+=("$root/proc")
as_root mount -t tmpfs shm "$root/dev/shm" && mounted+=("$root/dev/shm")

in_chroot() {
    as_root chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
        DEBIAN_FRONTEND=noninteractive "$@"
}
as_postgres() { in_chroot su postgres -s /bin/sh -c "$*"; }
transcript="$work/transcript.txt"
: > "$transcript"
say() { echo "$*" | tee -a "$transcript"; }

# a machine without a toolchain, and no trace of an earlier run
for tool in rustc cargo cc gcc clang make; do
    if in_chroot /bin/sh -c "command -v $tool" >/dev/null 2>&1; then
        echo "the test system has $tool: it must not" >&2
        exit 1
    fi
done
in_chroot dpkg --purge postgresql-15-chunked-map >/dev/null 2>&1 || true
as_root rm -rf "$root/var/tmp/cm"
as_root mkdir -p "$root/var/tmp/cm"
as_root cp "$deb" tests/fixtures/chunked_map-0.1.0-data.sql tests/fixtures/chunked_map-0.1.0-pages.json \
    sql/demo.sql tests/package/checks.sql "$root/var/tmp/cm/"
as_root chmod -R a+rX "$root/var/tmp/cm"

say "\$ dpkg -i $(basename "$deb")"
in_chroot dpkg -i "/var/tmp/cm/$(basename "$deb")" 2>&1 | tee -a "$transcript"
in_chroot dpkg -L postgresql-15-chunked-map | grep -E '\.(so|control|sql)$' | tee -a "$transcript"

in_chroot chown -R postgres: /var/tmp/cm
as_postgres "/usr/lib/postgresql/15/bin/initdb -D /var/tmp/cm/data -U postgres -A trust -E UTF8 --locale=C.UTF-8 >/var/tmp/cm/initdb.log"
as_postgres "/usr/lib/postgresql/15/bin/pg_ctl -D /var/tmp/cm/data -o '-k /var/tmp/cm -c listen_addresses=' -l /var/tmp/cm/server.log -w start >/dev/null"
psql() { as_postgres "psql -X -q -h /var/tmp/cm -U postgres -v ON_ERROR_STOP=1 $*"; }

say "\$ psql -c 'CREATE EXTENSION chunked_map' && psql -f demo.sql"
psql -d postgres -c "'CREATE EXTENSION chunked_map'"
psql -d postgres -At -c "\"SELECT 'installed ' || extversion FROM pg_extension WHERE extname = 'chunked_map'\"" | tee -a "$transcript"
psql -d postgres -f /var/tmp/cm/demo.sql > "$work/demo.out"
grep -c '' "$work/demo.out" | sed 's/^/demo lines: /' | tee -a "$transcript"
grep -q '"seq": 7' "$work/demo.out"

say "\$ CREATE EXTENSION chunked_map VERSION '0.1.0'; (0.1.0's data); ALTER EXTENSION chunked_map UPDATE"
psql -d postgres -c "'CREATE DATABASE upgraded'"
psql -d upgraded -c "\"CREATE EXTENSION chunked_map VERSION '0.1.0'\""
psql -d upgraded -f /var/tmp/cm/chunked_map-0.1.0-data.sql
psql -d upgraded -c "'ALTER EXTENSION chunked_map UPDATE'"
psql -d upgraded -At -f /var/tmp/cm/checks.sql | tee -a "$transcript" > "$work/checks.out"
version=$(basename "$deb" | sed -E 's/^[^_]+_([^_]+)_.*/\1/')
grep -qx "updated to $version" "$work/checks.out"
grep -qx 'pages byte-identical: 9 of 9' "$work/checks.out"
grep -qx 'appended after the update: 251' "$work/checks.out"
stored_before=$(psql -d upgraded -At -c "\"SELECT count(*) || ' chunks, ' || sum(cardinality(payloads)) || ' archived records' FROM chunked_map.archived_chunk\"")

say "\$ apt-get remove postgresql-15-chunked-map"
in_chroot apt-get remove -y -qq postgresql-15-chunked-map 2>&1 | tail -n 2 | tee -a "$transcript"
if in_chroot test -e /usr/lib/postgresql/15/lib/chunked_map.so; then
    echo "the library is still installed" >&2
    exit 1
fi
stored_after=$(psql -d upgraded -At -c "\"SELECT count(*) || ' chunks, ' || sum(cardinality(payloads)) || ' archived records' FROM chunked_map.archived_chunk\"")
say "stored before removal: $stored_before; after: $stored_after"
[ "$stored_before" = "$stored_after" ]
say "package test passed"
