#!/usr/bin/env bash
# Builds chunked_map and installs it into the PostgreSQL of $PG_MAJOR (scripts/lib.sh), with the install scripts
# of earlier versions (which `cargo pgrx install` does not copy) so that
# `CREATE EXTENSION chunked_map VERSION '0.1.0'` and upgrades from it work.
# Usage: install-extension.sh [--pg N] [--release]
set -euo pipefail
source "$(dirname "$0")/pg-option.sh"
source "$(dirname "$0")/lib.sh"
case "${1:-}" in
"" | --release) [ $# -le 1 ] || refuse_arguments "scripts/install-extension.sh [--pg N] [--release]" "${@:2}" ;;
*) refuse_arguments "scripts/install-extension.sh [--pg N] [--release]" "$@" ;;
esac
cd "$REPO_ROOT"

sudo_flag=()
is_root || sudo_flag=(--sudo)
log "cargo pgrx install $*"
cargo pgrx install --pg-config "$PG_CONFIG" "${sudo_flag[@]}" "$@"

extension_dir="$("$PG_CONFIG" --sharedir)/extension"
for script in sql/chunked_map--*.sql sql/message_store/chunked_map_message_store*; do
    [ -e "$script" ] || continue
    as_root install -m 644 "$script" "$extension_dir/"
done
