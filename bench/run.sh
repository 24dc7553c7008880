#!/usr/bin/env bash
# The chunked_map benchmark, one command: installs what is missing, builds and installs the
# release build and, for the side-by-side comparison, the released 0.3.0 (bench/baseline.sh),
# and runs bench/src/main.rs against its own throw-away cluster. Prints a markdown table and
# writes it to bench/results/latest.md. About 14 minutes (the last full run took 13.7), plus the two release builds.
# Usage: bench/run.sh [--no-baseline] [--append-rounds N] [--append-seconds S] [--rounds N] [--seconds S] [--quick]
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
cd "$REPO_ROOT"
scripts/prerequisites.sh
# the HTTP load test's load generator
command -v wrk >/dev/null || as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk
if [[ " $* " != *" --no-baseline "* ]]; then
    bench/baseline.sh
fi
scripts/install-extension.sh --release
cargo build --quiet --release -p subscribers-http
cargo run --quiet -p chunked_map_bench -- "$@"
