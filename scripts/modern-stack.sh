#!/usr/bin/env bash
# The Vulkan 1.4 test stack (issue 33): runs a command inside a Debian 13 (trixie) root with
# Mesa ≥ 25 lavapipe (Vulkan 1.4), the 1.4 loader, the 1.4 validation layers (synchronization
# validation included), vulkan-tools, glslang-tools and spirv-tools. The project's binaries are
# built on the host (Debian 12, glibc 2.36) and run inside (trixie's glibc is newer).
#
#   scripts/modern-stack.sh CMD [ARGS...]     e.g.  scripts/modern-stack.sh vulkaninfo --summary
#   scripts/modern-stack.sh --build           only make sure the root exists and is current
#   scripts/modern-stack.sh --path            print the root's directory (after --build's work)
#
# The root is made with debootstrap (minbase) from the mirror of this machine's own apt sources
# (the first Debian URI in /etc/apt/sources.list*, $ECHO_MODERN_MIRROR overrides), then apt-get
# installs the packages below from a trixie sources file inside the root. It is cached outside the
# clone, in $ECHO_MODERN_ROOT (default /var/cache/vk-echo/modern-root), and rebuilt when the
# package list, the suite or the mirror change (their hash is the stamp $ROOT.stamp). Building
# it takes a lock ($ROOT.lock); runs share it, so several runs can use one root at once.
#
# A run: a private mount namespace (unshare), in it the repository (this script's clone), the
# Cargo target directory ($CARGO_TARGET_DIR when it lies outside), the working directory and every
# path of $ECHO_MODERN_BIND (':'-separated) bind-mounted into the root at their own paths, proc,
# sys and dev mounted, the host's /tmp bound on /tmp (XDG_RUNTIME_DIR=/tmp unless it is set to a
# directory under /tmp), then chroot and CMD in the same working directory, with the caller's
# environment. Everything is unmounted when CMD ends, also when it fails (trap; the namespace
# ends with it in any case, so nothing stays mounted on the host). CMD's exit status is the
# script's. Needs root (mount, chroot); installs debootstrap on the host when it is missing.
#
# Times on the project's 2-core machine: docs/status.md ("Vulkan versions tested").
set -euo pipefail

suite=trixie
root="${ECHO_MODERN_ROOT:-/var/cache/vk-echo/modern-root}"
# What runs inside: the Vulkan stack, the tools the samples and the validation gate
# (scripts/validate-all.sh: bash, coreutils, grep, sed, awk, timeout) use, python3 for
# scripts/layer-manifest.py.
root_packages=(libvulkan1 mesa-vulkan-drivers vulkan-tools vulkan-validationlayers
               glslang-tools spirv-tools python3-minimal libstdc++6 ca-certificates)
# What this script needs on the host.
host_packages=(debootstrap debian-archive-keyring)
# Bump when the way the root is made changes (it is part of the stamp).
recipe=1

say() { echo "modern-stack: $*" >&2; }
die() { say "$*"; exit 2; }

[ $# -gt 0 ] || { sed -n '2,27p' "$0" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, mount, chroot); rerun as root or with sudo (scripts/test.sh: ECHO_MODERN=0 skips its Vulkan 1.4 stage)"

here=$(cd "$(dirname "$0")/.." && pwd)

# --- the inside of a run: called by ourselves under unshare, in a private mount namespace ---
if [ "${1:-}" = "--inside" ]; then
    shift
    cwd="$1"; shift
    mounted=()
    cleanup() {
        local i
        for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
            umount -l "${mounted[$i]}" 2>/dev/null || true
        done
    }
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    bind() { # SRC DST [--rbind]
        mkdir -p "$2"
        mount "${3:---bind}" "$1" "$2"
        mounted+=("$2")
    }
    mount -t proc proc "$root/proc"; mounted+=("$root/proc")
    bind /sys "$root/sys" --rbind
    bind /dev "$root/dev" --rbind
    bind /tmp "$root/tmp"
    # The repository, the target directory, the working directory, extra paths: same paths inside.
    declare -A seen=()
    paths=("$here")
    [ -n "${CARGO_TARGET_DIR:-}" ] && paths+=("$(realpath -m "$CARGO_TARGET_DIR")")
    paths+=("$cwd")
    if [ -n "${ECHO_MODERN_BIND:-}" ]; then
        IFS=: read -r -a extra <<< "$ECHO_MODERN_BIND"
        paths+=("${extra[@]}")
    fi
    for p in "${paths[@]}"; do
        [ -n "$p" ] && [ -d "$p" ] || continue
        p=$(realpath "$p")
        case "$p" in /|/tmp|/tmp/*|/proc*|/sys*|/dev*) continue ;; esac
        covered=0
        for q in "${!seen[@]}"; do case "$p/" in "$q"/*) covered=1 ;; esac; done
        [ "$covered" = 1 ] && continue
        seen[$p]=1
        bind "$p" "$root$p"
    done
    # The mount points stay as empty directories in the root: removing one would detach the
    # same path's mount of a run going on at the same time (Linux unmounts a removed mount point
    # in every namespace).
    # The clone's .git of a worktree points outside it: not needed inside (no git there).
    if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -d "$root${XDG_RUNTIME_DIR}" ]; then
        export XDG_RUNTIME_DIR=/tmp
    fi
    status=0
    chroot "$root" /bin/sh -c 'cd "$1" || exit 125; shift; exec "$@"' sh "$cwd" "$@" || status=$?
    exit "$status"
fi

# --- host side ---
missing=()
for p in "${host_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]} on the host"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 || say "apt-get update reported errors; installing anyway"
    apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends debootstrap debian-archive-keyring >&2
fi

# The mirror this machine's apt uses for Debian itself (deb822 URIs: or one-line deb entries).
mirror="${ECHO_MODERN_MIRROR:-}"
if [ -z "$mirror" ]; then
    mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
        awk '/^URIs:/ {print $2}' | grep -E '/debian/?$' | head -1 || true)
    [ -n "$mirror" ] || mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i !~ /^\[/) {print $i; break}}' |
        grep -E '/debian/?$' | head -1 || true)
    [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
fi
mirror=${mirror%/}
security=${mirror%/debian}/debian-security
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

stamp_text=$(printf 'recipe %s\nsuite %s\nmirror %s\npackages %s\n' "$recipe" "$suite" "$mirror" "${root_packages[*]}")
stamp=$(printf '%s' "$stamp_text" | sha256sum | cut -c1-16)

mkdir -p "$(dirname "$root")"
exec 9> "$root.lock"

# Nothing may be mounted below a root this script deletes (runs mount in their own namespace,
# so the host never has anything there; this only guards against a hand-made mount).
mounted_below() { grep -q " $(realpath -m "$1")/" /proc/self/mountinfo; }

build_root() {
    local new="$root.new" t0=$SECONDS
    if [ -e "$new" ]; then
        mounted_below "$new" && die "something is mounted below $new; unmount it first"
        rm -rf "$new"
    fi
    say "building the $suite root in $root from $mirror (packages: ${root_packages[*]})"
    debootstrap --variant=minbase --keyring="$keyring" --components=main "$suite" "$new" "$mirror" \
        > "$root.build.log" 2>&1 ||
        { tail -20 "$root.build.log" >&2; die "debootstrap failed (log: $root.build.log)"; }
    rm -f "$new/etc/apt/sources.list"
    cat > "$new/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    # apt inside the root, with proc and dev (some maintainer scripts want them).
    unshare --mount --propagation private -- /bin/sh -ec '
        r=$1; shift
        mount -t proc proc "$r/proc"; mount --rbind /dev "$r/dev"
        chroot "$r" env DEBIAN_FRONTEND=noninteractive LC_ALL=C apt-get update -q
        chroot "$r" env DEBIAN_FRONTEND=noninteractive LC_ALL=C \
            apt-get install -y -q --no-install-recommends "$@"
        chroot "$r" apt-get clean
        umount -l "$r/dev"; umount "$r/proc"' sh "$new" "${root_packages[@]}" \
        >> "$root.build.log" 2>&1 ||
        { tail -20 "$root.build.log" >&2; die "apt-get in the $suite root failed (log: $root.build.log)"; }
    chroot "$new" dpkg-query -W -f='${Package} ${Version}\n' > "$new/.vk-echo-packages"
    if [ -e "$root" ]; then
        mounted_below "$root" && die "something is mounted below $root; unmount it first"
        rm -rf "$root"
    fi
    mv "$new" "$root"
    printf '%s\n%s\n' "$stamp" "$stamp_text" > "$root.stamp"
    say "root built in $((SECONDS - t0)) s: $(grep -E '^(libvulkan1|mesa-vulkan-drivers|vulkan-validationlayers) ' "$root/.vk-echo-packages" | paste -sd, - | sed 's/,/, /g')"
}

current() { [ -d "$root" ] && [ -f "$root.stamp" ] && [ "$(head -1 "$root.stamp")" = "$stamp" ]; }
if ! current; then
    flock -x 9
    current || build_root
fi
flock -s 9

case "$1" in
    --build) exit 0 ;;
    --path) echo "$root"; exit 0 ;;
esac

# The lock stays held (shared) by unshare's child through fd 9: no rebuild under a running CMD.
exec unshare --mount --propagation private -- "$0" --inside "$PWD" "$@"
