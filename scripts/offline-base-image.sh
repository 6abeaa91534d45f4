#!/usr/bin/env bash
# Build and tag a local stand-in for the official python:3.x-slim image, from Debian packages only, for machines
# that cannot reach an image registry (DESIGN.md section 5). Needs root (debootstrap, chroot), a Docker engine and
# a reachable Debian mirror; by default it uses the mirror this host's apt is configured with.
#
#   scripts/offline-base-image.sh [--force] [--tag TAG] [--suite SUITE] [--mirror URL] [--security-mirror URL|none]
#
# What the image has: Debian's python3 (3.11 on bookworm) and python3-venv (ensurepip, so a derived image can
# `python3 -m venv` and pip-install from PyPI), ca-certificates, /usr/local/bin/python3 and /usr/local/bin/python
# symlinks (so Dockerfiles and entrypoints written for the official image work), PATH and LANG as the official
# image sets them, and CMD ["python3"]. What it has not: tini (use Docker's --init / init=True), pip on PATH,
# compilers, docs, man pages, translations, apt lists.
#
# Idempotent: if TAG exists and --force is not given, it does nothing. The image carries the sha256 of this script
# in the label verifier.base.script-sha256, so callers can tell a stale image from a current one.
set -euo pipefail

readonly PACKAGES=python3,python3-venv,ca-certificates,passwd
readonly KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
readonly IMAGE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

tag=verifier-base:offline
suite=bookworm
mirror=""
security_mirror=""
force=0
started=$SECONDS
lock_fd=""
workdir=""
rootfs=""

die() {
    echo "offline-base-image: error: $*" >&2
    exit 1
}

say() {
    echo "offline-base-image: [$((SECONDS - started))s] $*" >&2
}

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

parse_args() {
    while (($#)); do
        case "$1" in
            --force) force=1 ;;
            --tag) tag=${2:?--tag needs a value}; shift ;;
            --suite) suite=${2:?--suite needs a value}; shift ;;
            --mirror) mirror=${2:?--mirror needs a URL}; shift ;;
            --security-mirror) security_mirror=${2:?--security-mirror needs a URL or none}; shift ;;
            -h | --help) usage; exit 0 ;;
            *) die "unknown argument: $1 (see --help)" ;;
        esac
        shift
    done
}

# "URI SUITE" for every binary (deb) source apt on this host reads, in both the deb822 and the one-line format.
host_apt_sources() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [[ -r $f ]] && awk '$1 == "deb" { line = $0; sub(/\[[^]]*\][[:space:]]*/, "", line); split(line, f); print f[2], f[3] }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -r $f ]] && awk '
            function flush(   u, s) { if (types ~ /(^| )deb( |$)/ && enabled != "no") for (u in uris) for (s in suites) print uris[u], suites[s]; types = ""; enabled = ""; split("", uris); split("", suites) }
            /^[[:space:]]*$/ { flush(); next }
            /^#/ { next }
            tolower($1) == "types:" { $1 = ""; types = $0 " " }
            tolower($1) == "enabled:" { enabled = tolower($2) }
            tolower($1) == "uris:" { for (i = 2; i <= NF; i++) uris[i] = $i }
            tolower($1) == "suites:" { for (i = 2; i <= NF; i++) suites[i] = $i }
            END { flush() }' "$f"
    done
    return 0
}

# The host's Debian mirror (not its security archive), else deb.debian.org.
detect_mirror() {
    host_apt_sources | awk '$1 ~ /^https?:\/\// && $1 ~ /\/debian(\/|$)/ && $2 !~ /-security$|\/updates$/ { print $1; exit }' | grep . ||
        echo http://deb.debian.org/debian
}

detect_security_mirror() {
    host_apt_sources | awk '$1 ~ /^https?:\/\// && ($1 ~ /\/debian-security(\/|$)/ || $2 ~ /-security$/) { print $1; exit }' | grep . ||
        echo http://deb.debian.org/debian-security
}

preflight() {
    command -v docker >/dev/null || die "docker CLI not found; install Docker (apt-get install -y docker.io) first"
    local err
    err=$(docker info 2>&1 >/dev/null) || die "cannot reach the Docker engine (docker info failed): ${err##*$'\n'}"
    ((EUID == 0)) || die "debootstrap and chroot need root; run: sudo $0 $*"
    local missing=()
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    [[ -r $KEYRING ]] || missing+=(debian-archive-keyring)
    if ((${#missing[@]})); then
        command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install it; install ${missing[*]}"
        say "installing ${missing[*]}"
        apt_install "${missing[@]}" || die "apt-get install -y ${missing[*]} failed; install it, then try again"
        command -v debootstrap >/dev/null || die "debootstrap is installed but not on PATH ($PATH); add /usr/sbin"
    fi
    [[ -r /usr/share/debootstrap/scripts/$suite ]] || die "this debootstrap does not know suite '$suite'"
}

apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq "$@" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "$@" >/dev/null; }
}

# Paths mounted at or under the root filesystem, deepest first (debootstrap bind-mounts /dev when run in a container).
mounts_under_rootfs() {
    awk -v r="$rootfs" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r
}

cleanup() {
    [[ -n $workdir && -d $workdir ]] || return 0
    local m
    if [[ -n $rootfs ]]; then
        while read -r m; do umount -l "$m" || true; done < <(mounts_under_rootfs)
        if [[ -n $(mounts_under_rootfs) ]]; then
            say "still mounted under $rootfs; leaving $workdir for you to remove"
            return 0
        fi
    fi
    rm -rf --one-file-system "$workdir"
}

in_chroot() {
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 chroot "${rootfs:?}" "$@"
}

# Run a step with its output in a log, shown (the end of it) only if the step fails.
logged() {
    local log=$workdir/$1.log
    shift
    "$@" >>"$log" 2>&1 || {
        tail -n 30 "$log" >&2
        die "failed: $* (output above)"
    }
}

bootstrap() {
    say "debootstrap --variant=minbase $suite from $mirror"
    logged debootstrap debootstrap --variant=minbase --components=main --keyring="$KEYRING" --include="$PACKAGES" \
        "$suite" "$rootfs" "$mirror"
}

write_apt_sources() {
    local suites="$suite $suite-updates"
    rm -f "$rootfs/etc/apt/sources.list"
    {
        printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\n' "$mirror" "$suites"
        printf 'Signed-By: %s\n' "$KEYRING"
        if [[ $security_mirror != none ]]; then
            printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\n' "$security_mirror" "$suite"
            printf 'Signed-By: %s\n' "$KEYRING"
        fi
    } >"$rootfs/etc/apt/sources.list.d/debian.sources"
}

# debootstrap installs from the release only; take point and security updates like the official images do.
update_packages() {
    if [[ $security_mirror == none ]]; then
        say "applying $suite-updates (no security updates: --security-mirror none)"
    else
        say "applying $suite-updates and security updates from $security_mirror"
    fi
    write_apt_sources
    cp -L /etc/resolv.conf "$rootfs/etc/resolv.conf"
    mount -t proc proc "$rootfs/proc"
    logged update in_chroot apt-get update
    # No /dev/pts in the chroot: without Use-Pty=0 apt complains that it cannot write its log.
    logged update in_chroot apt-get -y -o Dpkg::Use-Pty=0 -o Dpkg::Options::=--force-confold dist-upgrade
    logged update in_chroot apt-get clean
    say "$(grep -c '^Setting up' "$workdir/update.log" || true) packages updated"
    umount "$rootfs/proc"
}

# Like debian:*-slim: keep future installs (in derived images) free of docs and translations as well.
write_slim_config() {
    cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
    cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
EOF
}

slim_rootfs() {
    local r=${rootfs:?}
    # Deleting under dev/ while the host's /dev is bind-mounted there would delete the host's device nodes.
    [[ -z $(mounts_under_rootfs) ]] || die "refusing to clean $r while something is mounted under it"
    write_slim_config
    find "$r/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete
    find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
    (
        cd "$r"
        rm -rf usr/share/{man,groff,info,lintian,linda}/* var/lib/apt/lists/* var/cache/apt/* \
            var/cache/debconf/*-old var/lib/dpkg/*-old var/log/* tmp/* var/tmp/* dev/* run/* root/.cache
    )
    # Docker provides these at run time; an image must not carry the build host's.
    : >"$r/etc/resolv.conf"
    : >"$r/etc/hostname"
    printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$r/etc/hosts"
    ln -sf /usr/bin/python3 "$r/usr/local/bin/python3"
    ln -sf /usr/bin/python3 "$r/usr/local/bin/python"
}

import_image() {
    local script_sha python_version
    script_sha=$(sha256sum "$0" | cut -d' ' -f1)
    python_version=$(in_chroot python3 -c 'import platform; print(platform.python_version())')
    say "importing $tag (Debian $suite, Python $python_version)"
    tar --numeric-owner --xattrs -C "$rootfs" -c . | docker import \
        --change "ENV PATH=$IMAGE_PATH" \
        --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["python3"]' \
        --change "LABEL org.opencontainers.image.title=verifier-base" \
        --change "LABEL org.opencontainers.image.description=\"Debian $suite minbase with python3, built offline\"" \
        --change "LABEL verifier.role=base verifier.base.suite=$suite verifier.base.python=$python_version" \
        --change "LABEL verifier.base.script-sha256=$script_sha" \
        --message "scripts/offline-base-image.sh: debootstrap $suite from $mirror" \
        - "$tag" >/dev/null
}

smoke_test() {
    docker run --rm --network none "$tag" python3 -c \
        'import ssl, sys, venv; print(sys.executable, sys.version.split()[0], ssl.OPENSSL_VERSION)' >&2 ||
        die "the imported image $tag does not run python3"
}

main() {
    parse_args "$@"
    if [[ $force == 0 ]] && docker image inspect "$tag" >/dev/null 2>&1; then
        say "$tag already exists; nothing to do (--force rebuilds it)"
        return 0
    fi
    preflight "$@"
    # One build at a time on this host; one that waited may find the image built by the other.
    exec {lock_fd}>"/tmp/offline-base-image.lock"
    flock "$lock_fd"
    if [[ $force == 0 ]] && docker image inspect "$tag" >/dev/null 2>&1; then
        say "$tag was built by another run meanwhile; nothing to do"
        return 0
    fi
    mirror=${mirror:-$(detect_mirror)}
    security_mirror=${security_mirror:-$(detect_security_mirror)}
    workdir=$(mktemp -d "${TMPDIR:-/var/tmp}/offline-base.XXXXXX")
    rootfs=$workdir/rootfs
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    bootstrap
    update_packages
    slim_rootfs
    import_image
    smoke_test
    local size
    size=$(docker image inspect --format '{{.Size}}' "$tag")
    say "built $tag: $((size / 1000000)) MB, in $((SECONDS - started)) s"
}

main "$@"
