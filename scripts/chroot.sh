#!/usr/bin/env bash
# The build chroots of the PostgreSQL versions that come from Debian suites this machine does
# not run (17: trixie, 18: forky): a Debian system with that PostgreSQL, its headers and a C
# toolchain, made once (see scripts/debian-chroot.sh), in which the project's own scripts run
# with the clone, the Rust toolchain and the cache bound at the same paths as outside.
#   scripts/chroot.sh prepare N          make the chroot for PostgreSQL N (once)
#   scripts/chroot.sh run N CMD...       run CMD there, in the clone, with PG_MAJOR=N
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$REPO_ROOT/scripts/debian-chroot.sh"

command=${1:?usage: chroot.sh prepare|run N [CMD...]}
major=${2:?PostgreSQL major version}
shift 2
suite=$(debian_suite "$major") || {
    echo "no Debian suite ships PostgreSQL $major" >&2
    exit 2
}
dir=$CHROOTS/build-$suite

# What building and testing needs; the client-language toolchains are not there (their tests
# run on PostgreSQL 15).
packages=(build-essential pkg-config clang libclang-dev sudo bzip2 xz-utils git ca-certificates
          "postgresql-$major" "postgresql-server-dev-$major" "postgresql-client-$major" python3)

case "$command" in
prepare)
    chroot_create "$dir" "$suite" "${packages[@]}"
    ;;
run)
    chroot_create "$dir" "$suite" "${packages[@]}"
    chroot_refresh_host_files "$dir"
    sysroot=$(rustc --print sysroot)
    cargo_home=${CARGO_HOME:-$HOME/.cargo}
    rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
    binds=("$REPO_ROOT" "$CACHE_DIR" "$rustup_home")
    if is_root; then
        # the crates downloaded once serve every chroot
        binds+=("$cargo_home")
        inside_cargo_home=$cargo_home
    else
        # the chroot runs as root: keep root-owned files out of the user's cargo home
        inside_cargo_home=/root/.cargo
        as_root mkdir -p "$dir/root/.cargo/bin"
        as_root cp "$cargo_home/bin/cargo-pgrx" "$dir/root/.cargo/bin/"
    fi
    CHROOT_ENV=(
        "PATH=$inside_cargo_home/bin:$sysroot/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        "CARGO_HOME=$inside_cargo_home" "RUSTUP_HOME=$rustup_home"
        "RUSTUP_TOOLCHAIN=$(basename "$sysroot")"
        "PG_MAJOR=$major" "CHUNKED_MAP_CACHE=$CACHE_DIR" "TERM=${TERM:-dumb}"
    )
    quoted=$(printf '%q ' "$@")
    chroot_with_mounts "$dir" "${binds[@]}" -- /bin/bash -c "cd $(printf '%q' "$REPO_ROOT") && $quoted"
    ;;
*)
    echo "unknown command $command" >&2
    exit 2
    ;;
esac
