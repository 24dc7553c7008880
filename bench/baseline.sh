#!/usr/bin/env bash
# Builds and installs a released chunked_map next to the current build, renamed (its own
# library, control file and install script: chunked_map_v030 for 0.3.0), so that the benchmark
# compares both in one run on one cluster, each in its own database. Run by bench/run.sh.
# Usage: bench/baseline.sh [GIT_REVISION NAME]   (default: b2865e6, the commit that landed 0.3.0,
# as chunked_map_v030; 0.2.0 was 98b8e23)
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
cd "$REPO_ROOT"
revision=${1:-b2865e6}
name=${2:-chunked_map_v030}
work="$REPO_ROOT/target/bench-baseline"
commit=$(git rev-parse "$revision^{commit}")
if [ -e "$("$PG_CONFIG" --pkglibdir)/$name.so" ] && [ "$(cat "$work/installed" 2>/dev/null)" = "$commit" ]; then
    log "$name from $revision is installed"
    exit 0
fi
rm -rf "$work/src"
mkdir -p "$work/src"
git archive "$revision" | tar -x -C "$work/src"
cd "$work/src"
# the extension alone, under its new name
sed -i "s/^name = \"chunked_map\"$/name = \"$name\"/; s/^members = .*/members = [\".\"]/" Cargo.toml
mv chunked_map.control "$name.control"
# the library asks the catalog for its own extension's version by name (0.3)
grep -rl "extname = 'chunked_map'" src | xargs -r sed -i "s/extname = 'chunked_map'/extname = '$name'/"
sed -i "s#\\\$libdir/chunked_map'#\\\$libdir/$name'#" "$name.control"
grep -q "$name" "$name.control" || { echo "could not rename the control file" >&2; exit 1; }
sudo_flag=()
is_root || sudo_flag=(--sudo)
log "building and installing $name from $revision (release, several minutes)"
CARGO_TARGET_DIR="$work/target" cargo pgrx install --release --pg-config "$PG_CONFIG" "${sudo_flag[@]}"
echo "$commit" > "$work/installed"
