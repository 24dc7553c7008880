# Debian systems in chroots, for the PostgreSQL versions this machine does not have and for
# installing the packages on a system without a toolchain. Sourced by scripts/chroot.sh and the
# package tests, after scripts/lib.sh. Each chroot is made once with debootstrap, from the mirror
# the machine uses, and kept under $CACHE_DIR/chroots (its downloaded packages under
# $CACHE_DIR/debs, so that making it again downloads nothing); the machine's own apt sources are
# never touched. Needs root (debootstrap, chroot, mount): as root, or with passwordless sudo.

MIRROR=${CHUNKED_MAP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
CHROOTS=$CACHE_DIR/chroots

# chroot_create DIR SUITE [EXTRA_PACKAGE...]: a minimal Debian SUITE in DIR, once (a marker
# says it is complete; an interrupted one is made again). PostgreSQL's packages install in it
# without starting a server or making a cluster; HTTPS to the registries works with the
# machine's extra CA certificates; apt accepts Release files past their Valid-Until date
# (forky's and sid's are).
chroot_create() {
    local dir=$1 suite=$2
    shift 2
    if [ -f "$dir/.chunked_map-ready" ]; then
        return 0
    fi
    dpkg-query -W -f='${Status}' debootstrap 2>/dev/null | grep -q "install ok installed" ||
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap
    local script=()
    # debootstrap has no script of its own for forky: it is made like sid
    [ "$suite" = forky ] && script=(/usr/share/debootstrap/scripts/sid)
    log "debootstrap: a minimal Debian $suite in $dir (once)"
    as_root rm -rf "$dir"
    as_root mkdir -p "$dir" "$CACHE_DIR/debs/$suite"
    as_root debootstrap --variant=minbase --cache-dir="$CACHE_DIR/debs/$suite" \
        --include=ca-certificates "$suite" "$dir" "$MIRROR" "${script[@]}" >"$dir.debootstrap.log" 2>&1 || {
        tail -n 20 "$dir.debootstrap.log" >&2
        return 1
    }
    # no service starts, and PostgreSQL's packages make no cluster of their own
    printf '#!/bin/sh\nexit 101\n' | as_root tee "$dir/usr/sbin/policy-rc.d" >/dev/null
    as_root chmod 755 "$dir/usr/sbin/policy-rc.d"
    as_root mkdir -p "$dir/etc/postgresql-common"
    echo "create_main_cluster = false" | as_root tee "$dir/etc/postgresql-common/createcluster.conf" >/dev/null
    echo 'Acquire::Check-Valid-Until "false";' | as_root tee "$dir/etc/apt/apt.conf.d/99chunked-map" >/dev/null
    echo "deb $MIRROR $suite main" | as_root tee "$dir/etc/apt/sources.list" >/dev/null
    as_root touch "$dir/etc/chunked_map-chroot"
    chroot_refresh_host_files "$dir"
    if [ $# -gt 0 ]; then
        chroot_apt "$dir" install "$@"
    fi
    as_root touch "$dir/.chunked_map-ready"
}

# The host's name resolution, host name (sudo wants it in /etc/hosts) and extra CA certificates
# (HTTPS to the registries goes through a proxy with its own), copied in again before each use.
chroot_refresh_host_files() {
    local dir=$1
    as_root cp /etc/resolv.conf "$dir/etc/resolv.conf"
    as_root cp /etc/hosts "$dir/etc/hosts"
    grep -qw "$(hostname)" "$dir/etc/hosts" ||
        echo "127.0.1.1 $(hostname)" | as_root tee -a "$dir/etc/hosts" >/dev/null
    if [ -d /usr/local/share/ca-certificates ]; then
        as_root mkdir -p "$dir/usr/local/share/ca-certificates"
        as_root cp -r /usr/local/share/ca-certificates/. "$dir/usr/local/share/ca-certificates/"
        chroot_exec "$dir" update-ca-certificates >/dev/null 2>&1 || true
    fi
}

# chroot_apt DIR ARGS...: apt-get ARGS in the chroot (update first), its downloads cached.
chroot_apt() {
    local dir=$1
    shift
    local suite
    suite=$(awk '{print $3; exit}' "$dir/etc/apt/sources.list")
    as_root mkdir -p "$CACHE_DIR/debs/$suite"
    chroot_with_mounts "$dir" "$CACHE_DIR/debs/$suite:/var/cache/apt/archives" -- \
        /bin/sh -c "apt-get -qq update && apt-get -y -qq --no-install-recommends -o Dpkg::Use-Pty=0 $*" \
        >>"$dir.apt.log" 2>&1 || {
        tail -n 30 "$dir.apt.log" >&2
        return 1
    }
}

# chroot_exec DIR CMD...: CMD in the chroot, as root, with a clean environment (no mounts).
chroot_exec() {
    local dir=$1
    shift
    as_root chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
        DEBIAN_FRONTEND=noninteractive HOME=/root "$@"
}

# chroot_with_mounts DIR [HOST_PATH[:INSIDE_PATH]]... -- CMD...: CMD in the chroot with /proc, a
# tmpfs on /dev/shm, and the given host paths bound (at the same path inside unless told
# otherwise); everything is unmounted afterwards, also when CMD fails. Extra environment for CMD
# comes from CHROOT_ENV (an array of NAME=VALUE).
chroot_with_mounts() {
    local dir=$1
    shift
    local binds=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        binds+=("$1")
        shift
    done
    shift
    local mounted=() status=0
    as_root mkdir -p "$dir/proc" "$dir/dev/shm"
    as_root mount -t proc proc "$dir/proc" && mounted+=("$dir/proc")
    as_root mount -t tmpfs shm "$dir/dev/shm" && mounted+=("$dir/dev/shm")
    local bind host inside
    for bind in "${binds[@]}"; do
        host=${bind%%:*}
        inside=${bind#*:}
        [ "$inside" = "$bind" ] && inside=$host
        as_root mkdir -p "$dir$inside"
        as_root mount --bind "$host" "$dir$inside" && mounted+=("$dir$inside")
    done
    as_root chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
        DEBIAN_FRONTEND=noninteractive HOME=/root "${CHROOT_ENV[@]}" "$@" || status=$?
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        as_root umount "${mounted[$i]}" || as_root umount -l "${mounted[$i]}" || true
    done
    return $status
}
CHROOT_ENV=()

# chroot_mount DIR / chroot_unmount DIR: /proc and a tmpfs on /dev/shm for a session of several
# chroot_exec commands (a server started in the chroot keeps running between them).
chroot_mount() {
    local dir=$1
    as_root mkdir -p "$dir/proc" "$dir/dev/shm"
    mountpoint -q "$dir/proc" || as_root mount -t proc proc "$dir/proc"
    mountpoint -q "$dir/dev/shm" || as_root mount -t tmpfs shm "$dir/dev/shm"
}

chroot_unmount() {
    local dir=$1 mount
    for mount in "$dir/dev/shm" "$dir/proc"; do
        if mountpoint -q "$mount"; then
            as_root umount "$mount" || as_root umount -l "$mount" || true
        fi
    done
}
