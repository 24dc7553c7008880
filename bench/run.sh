#!/usr/bin/env bash
# The chunked_map benchmark, one command: installs what is missing, builds and installs the
# release build, and runs bench/src/main.rs against its own throw-away cluster. Prints a
# markdown table and writes it to bench/results/latest.md. About 10 minutes.
# Usage: bench/run.sh [--append-rounds N] [--append-seconds S] [--rounds N] [--seconds S] [--quick]
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
cd "$REPO_ROOT"
scripts/prerequisites.sh
scripts/install-extension.sh --release
cargo run --quiet -p chunked_map_bench -- "$@"
