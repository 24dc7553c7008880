#!/usr/bin/env bash
# Installs each Debian package (scripts/package.sh) on a system of its own distribution that has
# that PostgreSQL and no Rust, no compiler, no build tools: a minimal debootstrap chroot
# (scripts/debian-chroot.sh; made once, cached). 15 on Debian 12, 17 on Debian 13, 18 on forky;
# 16 has no Debian package to depend on (docs/install.md: from source). In each, as an operator
# would:
#   - dpkg -i the package; CREATE EXTENSION; the psql demo's calls;
#   - a database of 0.1.0 (the oldest installable version) holding what that release wrote
#     (tests/fixtures): ALTER EXTENSION chunked_map UPDATE, every page byte-identical after;
#   - apt-get remove the package: the database's data is still there.
# Then, with 15 and 17 both asked for, pg_upgrade from 15 to 17 the Debian way
# (tests/package/pg_upgrade.sh). Transcripts: target/package-test/.
# Needs root (debootstrap, chroot, mounts): run as root or with passwordless sudo.
# Usage: tests/package/run.sh [N...]   (default: 15 17 18)
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
source "$REPO_ROOT/scripts/debian-chroot.sh"
cd "$REPO_ROOT"

versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(15 17 18)
work="$REPO_ROOT/target/package-test"
mkdir -p "$work"

# package N: builds the package for PostgreSQL N (in its build chroot for 17 and 18); prints
# its path
package() {
    if [ "$1" = 15 ]; then
        PG_MAJOR=15 scripts/package.sh | tail -n 1
    else
        scripts/chroot.sh run "$1" scripts/package.sh | tail -n 1
    fi
}

# install_test N DEB: the operator's session on a clean system of N's distribution
install_test() {
    local major=$1 deb=$2
    local suite name root transcript version
    suite=$(debian_suite "$major")
    name=postgresql-$major-chunked-map
    root=$CHROOTS/clean-$suite
    transcript="$work/transcript-$major.txt"
    version=$(basename "$deb" | sed -E 's/^[^_]+_([^_]+)_.*/\1/')
    chroot_create "$root" "$suite" "postgresql-$major"
    chroot_refresh_host_files "$root"
    : > "$transcript"
    say() { echo "$*" | tee -a "$transcript"; }
    as_postgres() { chroot_exec "$root" su postgres -s /bin/sh -c "$*"; }
    psql() { as_postgres "psql -X -q -h /var/tmp/cm -U postgres -v ON_ERROR_STOP=1 $*"; }
    local bin=/usr/lib/postgresql/$major/bin
    chroot_mount "$root"
    active+=("$root:$bin")

    # a machine without a toolchain, and no trace of an earlier run
    local tool
    for tool in rustc cargo cc gcc clang make; do
        if chroot_exec "$root" /bin/sh -c "command -v $tool" >/dev/null 2>&1; then
            echo "the test system for $major has $tool: it must not" >&2
            return 1
        fi
    done
    stop_server "$root" "$bin"
    chroot_exec "$root" dpkg --purge "$name" >/dev/null 2>&1 || true
    as_root rm -rf "$root/var/tmp/cm"
    as_root mkdir -p "$root/var/tmp/cm"
    as_root cp "$deb" tests/fixtures/chunked_map-0.1.0-data.sql tests/fixtures/chunked_map-0.1.0-pages.json \
        sql/demo.sql tests/package/checks.sql "$root/var/tmp/cm/"
    as_root chmod -R a+rX "$root/var/tmp/cm"

    say "== PostgreSQL $major on Debian $suite ($(chroot_exec "$root" cat /etc/debian_version))"
    say "\$ dpkg -i $(basename "$deb")"
    chroot_exec "$root" dpkg -i "/var/tmp/cm/$(basename "$deb")" 2>&1 | tee -a "$transcript"
    chroot_exec "$root" dpkg-query -W -f='Depends: ${Depends}\n' "$name" | tee -a "$transcript"
    chroot_exec "$root" dpkg -L "$name" | grep -E '\.(so|control|sql)$' | tee -a "$transcript"

    chroot_exec "$root" chown -R postgres: /var/tmp/cm
    as_postgres "$bin/initdb -D /var/tmp/cm/data -U postgres -A trust -E UTF8 --locale=C.UTF-8 >/var/tmp/cm/initdb.log"
    as_postgres "$bin/pg_ctl -D /var/tmp/cm/data -o '-k /var/tmp/cm -c listen_addresses=' -l /var/tmp/cm/server.log -w start >/dev/null"

    say "\$ psql -c 'CREATE EXTENSION chunked_map' && psql -f demo.sql"
    psql -d postgres -c "'CREATE EXTENSION chunked_map'"
    psql -d postgres -At -c "\"SELECT 'installed ' || extversion FROM pg_extension WHERE extname = 'chunked_map'\"" | tee -a "$transcript"
    psql -d postgres -f /var/tmp/cm/demo.sql > "$work/demo-$major.out"
    grep -c '' "$work/demo-$major.out" | sed 's/^/demo lines: /' | tee -a "$transcript"
    grep -q '"seq": 7' "$work/demo-$major.out"

    say "\$ CREATE EXTENSION chunked_map VERSION '0.1.0'; (0.1.0's data); ALTER EXTENSION chunked_map UPDATE"
    psql -d postgres -c "'CREATE DATABASE upgraded'"
    psql -d upgraded -c "\"CREATE EXTENSION chunked_map VERSION '0.1.0'\""
    psql -d upgraded -f /var/tmp/cm/chunked_map-0.1.0-data.sql
    psql -d upgraded -c "'ALTER EXTENSION chunked_map UPDATE'"
    psql -d upgraded -At -f /var/tmp/cm/checks.sql | tee -a "$transcript" > "$work/checks-$major.out"
    grep -qx "updated to $version" "$work/checks-$major.out"
    grep -qx 'pages byte-identical: 9 of 9' "$work/checks-$major.out"
    grep -qx 'appended after the update: 251' "$work/checks-$major.out"
    local stored="SELECT count(*) || ' chunks, ' || sum(cardinality(payloads)) || ' archived records' FROM chunked_map.archived_chunk"
    local stored_before stored_after
    stored_before=$(psql -d upgraded -At -c "\"$stored\"")

    say "\$ apt-get remove $name"
    chroot_exec "$root" apt-get remove -y -qq "$name" 2>&1 | tail -n 2 | tee -a "$transcript"
    if chroot_exec "$root" test -e "/usr/lib/postgresql/$major/lib/chunked_map.so"; then
        echo "the library is still installed" >&2
        return 1
    fi
    stored_after=$(psql -d upgraded -At -c "\"$stored\"")
    say "stored before removal: $stored_before; after: $stored_after"
    [ "$stored_before" = "$stored_after" ]
    say "package test passed: $(basename "$deb") ($(du -h "$deb" | cut -f1)) on Debian $suite"
    stop_server "$root" "$bin"
    chroot_unmount "$root"
}

# stop_server ROOT BIN: the test's server in that chroot, if it runs
stop_server() {
    chroot_exec "$1" /bin/sh -c "test -f /var/tmp/cm/data/postmaster.pid && su postgres -c '$2/pg_ctl -D /var/tmp/cm/data -m immediate stop'" \
        >/dev/null 2>&1 || true
}

active=()
cleanup() {
    local entry
    for entry in "${active[@]}"; do
        stop_server "${entry%%:*}" "${entry#*:}"
        chroot_unmount "${entry%%:*}"
    done
}
trap cleanup EXIT

declare -A debs=()
for major in "${versions[@]}"; do
    if ! debian_suite "$major" >/dev/null; then
        echo "PostgreSQL $major: no Debian package (no Debian suite ships PostgreSQL $major; build from source, docs/install.md)"
        continue
    fi
    log "the package for PostgreSQL $major"
    debs[$major]=$(package "$major")
    install_test "$major" "${debs[$major]}"
done

if [ -n "${debs[15]:-}" ] && [ -n "${debs[17]:-}" ]; then
    tests/package/pg_upgrade.sh "${debs[15]}" "${debs[17]}"
fi
