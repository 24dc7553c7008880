#!/usr/bin/env bash
# pg_upgrade from PostgreSQL 15 to 17, the way a Debian operator does it: a Debian 12 system with
# postgresql-15 and the 15 package holding maps in its cluster `15/main` is upgraded to Debian 13
# (the old server package stays installed, with the libraries it links), postgresql-17 and the 17
# package are added, and `pg_upgradecluster -m upgrade 15 main` moves the cluster to 17. Then every
# page reads byte-identical, appends go on, and chunked_verify finds every map consistent.
# Works on a copy of the cached clean Debian 12 chroot of tests/package/run.sh, made anew each
# run (its packages' downloads are cached). Transcript: target/package-test/transcript-pg_upgrade.txt.
# Usage: tests/package/pg_upgrade.sh DEB_15 DEB_17
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
source "$REPO_ROOT/scripts/debian-chroot.sh"
cd "$REPO_ROOT"

deb15=${1:?the package for PostgreSQL 15}
deb17=${2:?the package for PostgreSQL 17}
work="$REPO_ROOT/target/package-test"
transcript="$work/transcript-pg_upgrade.txt"
clean=$CHROOTS/clean-bookworm
root=$CHROOTS/upgrade-work
mkdir -p "$work"
: > "$transcript"
say() { echo "$*" | tee -a "$transcript"; }

chroot_create "$clean" bookworm postgresql-15
log "pg_upgrade: a copy of the clean Debian 12 system"
chroot_unmount "$root" 2>/dev/null || true
as_root rm -rf "$root"
as_root cp -a "$clean" "$root"
chroot_refresh_host_files "$root"
chroot_mount "$root"
cleanup() {
    chroot_exec "$root" /bin/sh -c 'pg_lsclusters -h 2>/dev/null | while read -r version name rest; do pg_ctlcluster "$version" "$name" stop -m immediate; done' \
        >/dev/null 2>&1 || true
    chroot_unmount "$root"
}
trap cleanup EXIT
as_root mkdir -p "$root/var/tmp/cm"
as_root cp "$deb15" "$deb17" "$root/var/tmp/cm/"
as_root chmod -R a+rX "$root/var/tmp/cm"
in_root() { chroot_exec "$root" "$@"; }
psql_at() { in_root su postgres -s /bin/sh -c "psql -X -q -At -v ON_ERROR_STOP=1 -p $1 -d app -c \"$2\""; }

say "== Debian $(in_root cat /etc/debian_version): postgresql-15 and $(basename "$deb15")"
in_root dpkg -i "/var/tmp/cm/$(basename "$deb15")" >/dev/null
in_root pg_createcluster --locale C.UTF-8 15 main >/dev/null
in_root pg_ctlcluster 15 main start
in_root su postgres -s /bin/sh -c "createdb app && psql -X -q -d app -v ON_ERROR_STOP=1" <<'SQL'
CREATE EXTENSION chunked_map;
SELECT chunked_map.chunked_start('subs', 5);
SELECT chunked_map.chunked_register('subs', jsonb_build_object('n', i)) FROM generate_series(1, 23) AS i;
SELECT chunked_map.chunked_start('audit');
SELECT count(*) FROM chunked_map.chunked_register_many('audit', ARRAY(SELECT jsonb_build_object('event', i) FROM generate_series(1, 250) AS i));
SELECT chunked_map.chunked_start('loud', 3);
SELECT chunked_map.chunked_set_notify('loud', true);
SELECT chunked_map.chunked_register('loud', '"héllo ☕"') FROM generate_series(1, 4);
SQL
pages="WITH RECURSIVE walk AS (
    SELECT s.map, 'current'::text AS token, chunked_map.chunked_page(s.map) AS page FROM chunked_map.map_state AS s
    UNION ALL
    SELECT w.map, w.page ->> 'next_page_token', chunked_map.chunked_page(w.map, w.page ->> 'next_page_token')
    FROM walk AS w WHERE w.page ->> 'next_page_token' IS NOT NULL)
SELECT map || ' ' || token || ' ' || md5(page::text) FROM walk ORDER BY 1"
psql_at 5432 "$pages" > "$work/pages-before-upgrade.txt"
say "pages before: $(wc -l < "$work/pages-before-upgrade.txt"), $(psql_at 5432 "SELECT 'chunked_map ' || extversion || ' on ' || current_setting('server_version') FROM pg_extension WHERE extname = 'chunked_map'")"

log "pg_upgrade: the system upgraded to Debian 13"
echo "deb $MIRROR trixie main" | as_root tee "$root/etc/apt/sources.list" >/dev/null
mkdir -p "$CACHE_DIR/debs/trixie"
chroot_with_mounts "$root" "$CACHE_DIR/debs/trixie:/var/cache/apt/archives" -- /bin/sh -c \
    "apt-get -qq update && apt-get -y -qq -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold -o Dpkg::Use-Pty=0 dist-upgrade && apt-get -y -qq --no-install-recommends -o Dpkg::Use-Pty=0 install postgresql-17" \
    > "$work/pg_upgrade-apt.log" 2>&1 || {
    tail -n 30 "$work/pg_upgrade-apt.log" >&2
    exit 1
}
say "== Debian $(in_root cat /etc/debian_version): postgresql-15 kept ($(in_root dpkg-query -W -f='${Version}' postgresql-15)), postgresql-17 $(in_root dpkg-query -W -f='${Version}' postgresql-17) added, and $(basename "$deb17")"
in_root dpkg -i "/var/tmp/cm/$(basename "$deb17")" >/dev/null
say "\$ pg_upgradecluster -m upgrade 15 main"
in_root pg_upgradecluster -m upgrade 15 main 2>&1 | grep -E "^(Upgrading|Performing|Checking for|Upgrade Complete|Success|Ver Cluster|1[57] +main)" | tee -a "$transcript" || true
in_root pg_lsclusters | tee -a "$transcript"
new_port=$(in_root pg_lsclusters -h | awk '$1 == 17 && $2 == "main" {print $3}')
[ -n "$new_port" ] || { echo "no 17/main cluster after pg_upgradecluster" >&2; exit 1; }
in_root pg_ctlcluster 17 main status >/dev/null 2>&1 || in_root pg_ctlcluster 17 main start

psql_at "$new_port" "$pages" > "$work/pages-after-upgrade.txt"
if ! diff -u "$work/pages-before-upgrade.txt" "$work/pages-after-upgrade.txt" >&2; then
    echo "pages changed across pg_upgrade" >&2
    exit 1
fi
say "after: $(psql_at "$new_port" "SELECT 'chunked_map ' || extversion || ' on ' || current_setting('server_version') FROM pg_extension WHERE extname = 'chunked_map'"); every page byte-identical: $(wc -l < "$work/pages-after-upgrade.txt") of $(wc -l < "$work/pages-before-upgrade.txt")"
appended=$(psql_at "$new_port" "SELECT string_agg(m || ' ' || chunked_map.chunked_register(m, '{\\\"after\\\": \\\"pg_upgrade\\\"}'), ', ' ORDER BY m) FROM unnest(ARRAY['audit', 'loud', 'subs']) AS m")
say "appended after the upgrade: $appended"
[ "$appended" = "audit 251, loud 5, subs 24" ]
consistent=$(psql_at "$new_port" "SELECT string_agg(s.map || ' ' || (chunked_map.chunked_verify(s.map) ->> 'consistent'), ', ' ORDER BY s.map) FROM chunked_map.map_state AS s")
say "consistent: $consistent"
[ "$consistent" = "audit true, loud true, subs true" ]
say "pg_upgrade test passed"
