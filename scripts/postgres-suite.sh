#!/usr/bin/env bash
# PostgreSQL's own regression suite, run on throw-away clusters of the same server:
#   1. plain;
#   2. with chunked_map in shared_preload_libraries, created in template1, and the server
#      started with RUST_BACKTRACE=1;
#   3. the same, and chunked_map created in the suite's own database too;
# and the result files compared with the plain run's: installing and preloading chunked_map
# must change nothing for the rest of the database (see compare() for the one thing run 3 may
# add). Any difference, or a backend that crashed, fails.
#
# The suite (SQL, expected output, regress.c, contrib/spi's autoinc.c and refint.c) comes from
# Debian's source package of this PostgreSQL, fetched with a private apt configuration (the
# machine's apt sources are not touched) and cached outside the clone; the C parts are built
# against the installed server headers with PGXS.
# Usage: scripts/postgres-suite.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"

suite_release=${POSTGRES_SUITE_RELEASE:-bookworm}
cache="$CACHE_DIR/postgres-suite-$PG_MAJOR"
work=/tmp/chunked_map-postgres-suite-$PG_MAJOR
mkdir -p "$cache"

# --- the source package, once -------------------------------------------------------------
if ! ls "$cache"/postgresql-"$PG_MAJOR"_*.orig.tar.* >/dev/null 2>&1; then
    log "fetching Debian's source of postgresql-$PG_MAJOR ($suite_release, private apt configuration)"
    apt_dir="$cache/apt"
    mkdir -p "$apt_dir"/{lists/partial,archives/partial,sources.list.d,preferences.d}
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite_release main" \
        > "$apt_dir/sources.list"
    apt_options=(-q -o Dir::Etc::SourceList="$apt_dir/sources.list"
        -o Dir::Etc::SourceParts="$apt_dir/sources.list.d"
        -o Dir::Etc::PreferencesParts="$apt_dir/preferences.d"
        -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir"
        -o Acquire::Check-Valid-Until=false)
    apt-get "${apt_options[@]}" update >/dev/null
    (cd "$cache" && apt-get "${apt_options[@]}" source --download-only "postgresql-$PG_MAJOR" 2>&1 |
        grep -v "^W: Download is performed unsandboxed" >&2)
fi
tarball=$(ls "$cache"/postgresql-"$PG_MAJOR"_*.orig.tar.* | head -n 1)
suite_version=$(basename "$tarball" | sed -E 's/^postgresql-[0-9]+_([0-9.]+)\.orig\.tar\..*/\1/')

# --- the suite and its C parts, built against this server's headers ------------------------
suite="$work/postgresql-$suite_version/src/test/regress"
if [ ! -f "$work/.built-$suite_version" ]; then
    log "building PostgreSQL $suite_version's regression suite (regress.c, autoinc.c, refint.c)"
    rm -rf "$work"
    mkdir -p "$work"
    tar -xf "$tarball" -C "$work" "postgresql-$suite_version/src/test/regress" \
        "postgresql-$suite_version/contrib/spi"
    cp "$work/postgresql-$suite_version/contrib/spi/"{autoinc.c,refint.c} "$suite/"
    printf 'MODULES = regress autoinc refint\nPG_CONFIG = %s\nPGXS := $(shell $(PG_CONFIG) --pgxs)\ninclude $(PGXS)\n' \
        "$PG_CONFIG" > "$suite/Makefile.chunked_map"
    make -s -C "$suite" -f Makefile.chunked_map >"$work/build.log" 2>&1 || {
        cat "$work/build.log" >&2
        exit 1
    }
    touch "$work/.built-$suite_version"
fi
chmod -R a+rX "$work"
is_root && chown -R postgres: "$work"

# --- three runs ----------------------------------------------------------------------------
server_version=$("$PGBIN/postgres" --version | awk '{print $3}')
port_base=${POSTGRES_SUITE_PORT:-56400}
runs=/tmp/chunked_map-postgres-suite-$PG_MAJOR-runs
rm -rf "$runs"
mkdir -p "$runs"
chmod a+rwx "$runs"
started=()
cleanup() {
    for dir in "${started[@]}"; do
        "$REPO_ROOT/scripts/pgcluster.sh" stop "$dir" immediate >/dev/null 2>&1 || true
    done
}
trap cleanup EXIT

# run NAME PORT MODE: one run of the suite on a cluster of its own, MODE being
#   plain      nothing of chunked_map;
#   preloaded  shared_preload_libraries = chunked_map, RUST_BACKTRACE=1 in the server's
#              environment, CREATE EXTENSION chunked_map in template1 (so in every database a
#              test creates from it; pg_regress makes its own database from template0);
#   installed  the same, and the extension created in pg_regress's database too.
# Leaves its results in $runs/NAME and its summary line in $runs/NAME.summary.
run() {
    local name=$1 port=$2 mode=$3
    local dir=$runs/$name-cluster
    local settings=() load=() environment=(env -u RUST_BACKTRACE -u RUST_LIB_BACKTRACE)
    if [ "$mode" != plain ]; then
        settings=(-c "shared_preload_libraries=chunked_map")
        environment+=(RUST_BACKTRACE=1)
    fi
    [ "$mode" = installed ] && load=(--load-extension=chunked_map)
    started+=("$dir")
    "${environment[@]}" "$REPO_ROOT/scripts/pgcluster.sh" start "$dir" "$port" "${settings[@]}"
    if [ "$mode" != plain ]; then
        "$PGBIN/psql" -X -q -h "$dir" -p "$port" -U postgres -d template1 -v ON_ERROR_STOP=1 \
            -c 'CREATE EXTENSION chunked_map'
    fi
    local out=$runs/$name
    mkdir -p "$out"
    is_root && chown postgres: "$out"
    (cd "$suite" && as_server_owner "$PGXS_DIR/src/test/regress/pg_regress" \
        --inputdir="$suite" --outputdir="$out" --bindir="$PGBIN" --dlpath="$suite" \
        --schedule="$suite/parallel_schedule" --host="$dir" --port="$port" --user=postgres \
        "${load[@]}" >"$out/pg_regress.log" 2>&1) || true
    "$REPO_ROOT/scripts/pgcluster.sh" stop "$dir" >/dev/null
    if grep -qE "terminated by signal|server process .* was terminated|PANIC" "$dir/server.log"; then
        echo "a backend crashed during the $name run:" >&2
        grep -E "terminated by signal|was terminated|PANIC" "$dir/server.log" >&2
        exit 1
    fi
    if ! grep -qE "^ *(All [0-9]+ tests passed|[0-9]+ of [0-9]+ tests failed)" "$out/pg_regress.log"; then
        echo "the $name run did not complete:" >&2
        tail -n 30 "$out/pg_regress.log" >&2
        exit 1
    fi
    grep -E "^ *(All [0-9]+ tests passed|[0-9]+ of [0-9]+ tests failed)" "$out/pg_regress.log" |
        tr -s ' ' | sed -e 's/^ //' -e 's/[ .]*$//' > "$runs/$name.summary"
}

# compare A B [--mask]: the result files of two runs must be identical. With --mask, the two
# results that list every SECURITY DEFINER function (opr_sanity) and every event trigger
# (event_trigger) of the database are compared with those two listings cut out: in a database
# where the extension is installed, they list its own functions and its event trigger, and
# nothing else may differ there either.
compare() {
    local a=$runs/$1/results b=$runs/$2/results
    if [ "${3:-}" = --mask ]; then
        for side in "$a" "$b"; do
            python3 "$REPO_ROOT/scripts/mask-catalog-listings.py" "$side/opr_sanity.out" "$side/event_trigger.out"
        done
    fi
    if ! diff -r -u "$a" "$b" > "$runs/$1-vs-$2.diff"; then
        echo "PostgreSQL's regression suite gives other results with chunked_map ($1 / $2):" >&2
        diff -r -q "$a" "$b" >&2 || true
        head -n 300 "$runs/$1-vs-$2.diff" >&2
        exit 1
    fi
    ls "$a" | wc -l
}

log "PostgreSQL's regression suite $suite_version on server $server_version: plain"
run plain "$port_base" plain
log "the same, chunked_map preloaded (RUST_BACKTRACE=1) and created in template1"
run preloaded "$((port_base + 1))" preloaded
log "the same, chunked_map also created in the suite's database"
run installed "$((port_base + 2))" installed
identical=$(compare plain preloaded)
masked=$(compare plain installed --mask)
echo "PostgreSQL $server_version, its regression suite $suite_version:" \
    "plain: $(cat "$runs/plain.summary");" \
    "chunked_map preloaded and in template1: $(cat "$runs/preloaded.summary"), $identical result files identical;" \
    "also in the suite's database: $(cat "$runs/installed.summary"), $masked result files identical (2 with the database's listings of SECURITY DEFINER functions and event triggers cut out)"
rm -rf "$runs"
