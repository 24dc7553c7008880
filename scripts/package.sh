#!/usr/bin/env bash
# Builds the release extension and makes the Debian package an operator installs with apt or
# dpkg, laid out and named as Debian's PostgreSQL extension packages are:
#   target/package/postgresql-15-chunked-map_<version>_<arch>.deb      (PG_MAJOR=15, Debian 12)
#   target/pg17/package/postgresql-17-chunked-map_<version>_<arch>.deb (in the 17 chroot, Debian 13)
#   target/pg18/package/postgresql-18-chunked-map_<version>_<arch>.deb (in the 18 chroot, forky)
# holding the library under that PostgreSQL's library directory, and the control file and every
# install and upgrade script under its extension directory. The version is Cargo.toml's.
# Only tools from Debian's packages (dpkg-deb, dpkg-shlibdeps). Prints the package's path.
# Its Depends are those of the system it is built on: build it on the distribution it is for
# (17 and 18 are built in their chroot, made the first time).
# Usage: scripts/package.sh [--pg N]   (N: 15, the default, 17 or 18; 16 has no Debian package)
set -euo pipefail
source "$(dirname "$0")/pg-option.sh"
source "$(dirname "$0")/lib.sh"
refuse_arguments "scripts/package.sh [--pg N]" "$@"
cd "$REPO_ROOT"

case "$PG_MAJOR" in
15) ;;
16)
    echo "package.sh: no Debian suite ships PostgreSQL 16, so there is no package to depend on (docs/install.md builds it from source)" >&2
    exit 2
    ;;
17 | 18)
    if [ ! -f /etc/chunked_map-chroot ]; then
        exec "$REPO_ROOT/scripts/chroot.sh" run "$PG_MAJOR" scripts/package.sh
    fi
    ;;
esac

scripts/prerequisites.sh >&2
version=$(cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json, sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "chunked_map"))')
arch=$(dpkg --print-architecture)
name=postgresql-$PG_MAJOR-chunked-map
out="$CARGO_TARGET_DIR/package"
staging="$out/staging"
deb="$out/${name}_${version}_${arch}.deb"

log "cargo pgrx package (release)"
rm -rf "$staging"
cargo pgrx package --pg-config "$PG_CONFIG" --out-dir "$staging" >&2

# cargo pgrx package lays the files out under the pg_config paths; add the released install
# scripts and the upgrade scripts, which it does not copy
extension_dir="$staging$("$PG_CONFIG" --sharedir)/extension"
library_dir="$staging$("$PG_CONFIG" --pkglibdir)"
test -f "$library_dir/chunked_map.so"
test -f "$extension_dir/chunked_map--$version.sql"
install -m 644 sql/chunked_map--*.sql sql/message_store/chunked_map_message_store* "$extension_dir/"
strip --strip-unneeded "$library_dir/chunked_map.so"
chmod 644 "$library_dir/chunked_map.so" "$extension_dir"/*

doc="$staging/usr/share/doc/$name"
mkdir -p "$doc"
{
    echo "chunked_map $version"
    echo
    echo "Append-only, insertion-ordered logs per key in PostgreSQL. License: Apache-2.0."
    echo "Source and documentation: the chunked_map repository's README."
} > "$doc/copyright"
gzip -9n < <(printf 'chunked_map (%s) stable; urgency=medium\n\n  * Release %s.\n\n -- chunked_map developers <chunked-map@localhost>  %s\n' \
    "$version" "$version" "$(date -R -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}")") \
    > "$doc/changelog.Debian.gz"

# what the library links against, as Debian states it
shlibs=$(cd "$out" && mkdir -p debian && printf 'Source: %s\n\nPackage: %s\nArchitecture: any\n' "$name" "$name" > debian/control &&
    dpkg-shlibdeps -O -e"$library_dir/chunked_map.so" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
rm -rf "$out/debian"

mkdir -p "$staging/DEBIAN"
installed_size=$(du -sk --exclude=DEBIAN "$staging" | cut -f1)
cat > "$staging/DEBIAN/control" <<CONTROL
Package: $name
Version: $version
Architecture: $arch
Maintainer: chunked_map developers <chunked-map@localhost>
Installed-Size: $installed_size
Depends: postgresql-$PG_MAJOR${shlibs:+, $shlibs}
Section: database
Priority: optional
Description: append-only, insertion-ordered logs per key for PostgreSQL $PG_MAJOR
 chunked_map keeps an append-only log per key (subscriber history, audit events,
 agent messages) in bounded chunks: appends cost the same at record 10 and at
 record 10 million, and reads come in stable, token-addressed pages, newest
 first. Create it in a database with CREATE EXTENSION chunked_map (as a
 superuser); update it with ALTER EXTENSION chunked_map UPDATE.
CONTROL

rm -f "$deb"
dpkg-deb --root-owner-group -Zxz --build "$staging" "$deb" >&2
log "built $deb ($(du -h "$deb" | cut -f1))"
echo "$deb"
