#!/usr/bin/env bash
# The README's two commands on a freshly installed Debian 12 machine that has only a Rust
# toolchain (issue 34): builds such a machine as a chroot, clones this repository's HEAD into
# it, and runs `scripts/demo.sh` then `scripts/test.sh` inside, as root. Whatever the project's
# scripts forget to install fails here instead of on a user's machine. Not part of the test
# command (it takes as long as the test command plus a full build from nothing).
#
#   scripts/clean-room.sh                 the base root from its cache (built on the first run)
#   scripts/clean-room.sh --rebuild-base  debootstrap the base root again first
#   scripts/clean-room.sh --base-only     only make sure the cached base root exists
#   scripts/clean-room.sh --keep          leave the run's root behind (it is removed otherwise)
#   scripts/clean-room.sh --demo-only     run only scripts/demo.sh inside (a quicker check)
#   scripts/clean-room.sh --test-only     run only scripts/test.sh inside
#
# "A fresh Debian 12 machine with only Rust" is, here:
#   - Debian 12 (bookworm) from debootstrap --variant=minbase, from the Debian mirrors this
#     machine's apt uses (/etc/apt/sources.list and sources.list.d; only the Debian archive and
#     security entries are copied in), then every package a new machine of this project's kind
#     has: ../shared/fresh-image/debian-packages.txt (gcc, g++, python3, git, curl,
#     ca-certificates, valgrind, ... 700-odd), those that the Debian archive has (the list's
#     google-cloud-cli* come from Google's repository and are left out; the list is printed).
#     Nothing the project's scripts install is in the base: not the Vulkan packages, not cpio.
#   - root, as on the CI machines (the scripts install with apt-get as root; no sudo package).
#   - Rust: what `rustup-init -y` gives a new machine: rustup's proxies (this machine's
#     ~/.cargo/bin, copied) and its default toolchain (copied from ~/.rustup, with the standard
#     library of the host's target only: another target added here, e.g. aarch64, is left out, so
#     `rustup target add` runs inside as it would there); nothing here is changed. CARGO_HOME
#     starts empty, so every crate comes from crates.io as on a new machine.
#   - the root bind-mounted onto itself (so that / is a mount point), proc, sys and dev mounted, /etc/resolv.conf copied (apt, crates.io and PyPI need the
#     network) and this machine's local CA certificates (/usr/local/share/ca-certificates, e.g.
#     an egress proxy's: without them cargo fails with "SSL certificate problem: self-signed
#     certificate in certificate chain") added with update-ca-certificates, XDG_RUNTIME_DIR=/tmp, an environment of HOME, PATH, LANG, TERM, USER only, and
#     ../shared beside the clone (as CI has it). /usr/sbin/policy-rc.d stops package scripts
#     from starting daemons inside the root.
#
# The base root is cached as a tar outside the repository (ECHO_CLEAN_ROOM_CACHE, default
# /var/cache/vk-echo/clean-room-base.tar, with a .packages list beside it); each run unpacks a
# pristine copy (the run that builds it uses the fresh root itself) into ECHO_CLEAN_ROOM_DIR (default /var/tmp/vk-echo-clean-room/run.<pid>) and
# unmounts everything on exit (trap). Installs debootstrap (apt-get) when it is missing. Needs
# root. Prints the time of each step and the total; exits non-zero when a command fails inside.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

rebuild=0
base_only=0
keep=0
demo_only=0
test_only=0
for a in "$@"; do
    case "$a" in
        --rebuild-base) rebuild=1 ;;
        --base-only) base_only=1 ;;
        --keep) keep=1 ;;
        --demo-only) demo_only=1 ;;
        --test-only) test_only=1 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "scripts/clean-room.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
    esac
done

[ "$(id -u)" -eq 0 ] || { echo "scripts/clean-room.sh: needs root (debootstrap, chroot, mounts)" >&2; exit 1; }

start=$SECONDS
step() { echo "== clean-room: $* (after $((SECONDS - start)) s)"; }

suite=bookworm
cache=${ECHO_CLEAN_ROOM_CACHE:-/var/cache/vk-echo/clean-room-base.tar}
fresh_list=${ECHO_FRESH_PACKAGES:-$repo/../shared/fresh-image/debian-packages.txt}
runs=${ECHO_CLEAN_ROOM_DIR:-/var/tmp/vk-echo-clean-room}
rust_home=${ECHO_CLEAN_ROOM_RUST_HOME:-$HOME}
export DEBIAN_FRONTEND=noninteractive

# ------------------------------------------------------------------ host tools
step "host tools (debootstrap)"
if ! command -v debootstrap >/dev/null; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends debootstrap >&2
fi

# ------------------------------------------------------------------ mounts and cleanup
mounted=() # mount points, innermost last
work=""
mount_at() { # mount_at TARGET MOUNT-ARGS...
    local t=$1
    shift
    mkdir -p "$t"
    mount "$@" "$t"
    mounted+=("$t")
}
cleanup() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount -R "${mounted[$i]}" 2>/dev/null || umount -R -l "${mounted[$i]}" 2>/dev/null || true
    done
    mounted=()
    if [ -n "$work" ] && [ -d "$work" ]; then
        # Never remove a tree that still has something mounted below it.
        if grep -q " $work/" /proc/self/mounts; then
            echo "scripts/clean-room.sh: mounts are left under $work; not removing it" >&2
        elif [ "$keep" -eq 1 ]; then
            echo "scripts/clean-room.sh: the run's root is kept: $work/root"
        else
            rm -rf "$work"
        fi
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mount_system() { # mount_system ROOT: proc, sys, dev (with pts and shm)
    local r=$1
    mount_at "$r/proc" -t proc proc
    mount_at "$r/sys" --rbind /sys
    mount --make-rslave "$r/sys"
    mount_at "$r/dev" --rbind /dev
    mount --make-rslave "$r/dev"
    cp -L /etc/resolv.conf "$r/etc/resolv.conf"
}
unmount_all() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -R "${mounted[$i]}"; done
    mounted=()
}
in_root() { # in_root ROOT COMMAND...: a clean environment
    local r=$1
    shift
    chroot "$r" /usr/bin/env -i HOME=/root USER=root LOGNAME=root LANG=C.UTF-8 TERM=dumb \
        PATH=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        XDG_RUNTIME_DIR=/tmp DEBIAN_FRONTEND=noninteractive "$@"
}

# ------------------------------------------------------------------ base root (cached)
# The Debian entries of this machine's apt sources, as one deb822 file for the root.
debian_sources() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        case "$f" in
            *.list)
                # one-line style: keep deb lines for the Debian archive and security
                grep -E '^deb\s' "$f" | grep -E 'debian\.org|debian-security|/debian/?\s' |
                    while read -r _ rest; do
                        rest=$(sed 's/\[[^]]*\]//' <<<"$rest")
                        read -r uri dist comps <<<"$rest"
                        printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: %s\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n' \
                            "$uri" "$dist" "$comps"
                    done
                ;;
            *.sources)
                grep -q 'debian-archive-keyring\|debian\.org' "$f" && { grep -v '^#' "$f"; echo; }
                ;;
        esac
    done
}
mirror() { # the first Debian archive URI (not security) of this machine's sources
    debian_sources | sed -n 's/^URIs: *//p' | tr ' ' '\n' | grep -v security | head -1
}

build_base() {
    local b=$1 m
    m=$(mirror)
    [ -n "$m" ] || m=http://deb.debian.org/debian
    [ -f "$fresh_list" ] || { echo "scripts/clean-room.sh: no fresh-image package list at $fresh_list" >&2; exit 1; }
    step "debootstrap --variant=minbase $suite from $m"
    debootstrap --variant=minbase "$suite" "$b/root" "$m" >"$b/debootstrap.log" 2>&1 ||
        { tail -30 "$b/debootstrap.log" >&2; exit 1; }
    rm -f "$b/root/etc/apt/sources.list"
    debian_sources >"$b/root/etc/apt/sources.list.d/debian.sources"
    printf '#!/bin/sh\nexit 101\n' >"$b/root/usr/sbin/policy-rc.d"
    chmod +x "$b/root/usr/sbin/policy-rc.d"
    mount_system "$b/root"
    step "the fresh image's packages ($(grep -c . "$fresh_list") in $fresh_list)"
    in_root "$b/root" apt-get update -qq
    # Those the Debian archive has; the rest (other vendors' repositories) are listed.
    sed 's/:.*//; s/[[:space:]]//g; /^$/d' "$fresh_list" | sort -u >"$b/wanted"
    in_root "$b/root" apt-cache policy $(cat "$b/wanted") 2>/dev/null |
        awk '/^[^ ]/{p=$1; sub(":$","",p)} /Candidate:/{if ($2 != "(none)") print p}' | sort -u >"$b/available"
    comm -23 "$b/wanted" "$b/available" >"$b/left-out"
    echo "not in the Debian archive, left out ($(wc -l <"$b/left-out")): $(tr '\n' ' ' <"$b/left-out")"
    # shellcheck disable=SC2046
    in_root "$b/root" apt-get install -y -qq --no-install-recommends $(cat "$b/available") \
        >"$b/install.log" 2>&1 || { tail -40 "$b/install.log" >&2; exit 1; }
    in_root "$b/root" apt-get clean
    unmount_all
    rm -f "$b/root/etc/resolv.conf"
    in_root "$b/root" dpkg-query -W -f='${Package}\n' | sort >"$b/packages"
    echo "base root: $(wc -l <"$b/packages") packages, $(du -sh "$b/root" | cut -f1)"
    step "caching the base root in $cache"
    mkdir -p "$(dirname "$cache")"
    tar -C "$b/root" --numeric-owner -cf "$cache.new" .
    cp "$b/packages" "$cache.packages"
    cp "$b/left-out" "$cache.left-out"
    mv "$cache.new" "$cache"
}

mkdir -p "$runs"
work=$(mktemp -d "$runs/run.XXXXXX")
root=$work/root
if [ "$rebuild" -eq 1 ] || [ ! -f "$cache" ]; then
    build_base "$work"
    # The root just built is what the cache holds: this run uses it as it is.
else
    echo "base root: $cache ($(du -h "$cache" | cut -f1), $(wc -l <"$cache.packages") packages, made $(date -u -r "$cache" '+%F %T UTC'))"
    [ "$base_only" -eq 1 ] || {
        step "unpacking a pristine copy of the base root"
        mkdir "$root"
        tar -C "$root" --numeric-owner -xf "$cache"
    }
fi
[ "$base_only" -eq 1 ] && { step "done"; exit 0; }

# The root a mount point of its own, as / is on a machine: `unshare --propagation private`
# (tests/scripts/deb-install.sh's sandbox) fails with EINVAL in a chroot whose / is not one, and
# the package test then installs into the root itself.
mount_at "$root" --bind "$root"
mount_system "$root"
step "this machine's local CA certificates"
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    in_root "$root" update-ca-certificates >/dev/null
    ls /usr/local/share/ca-certificates/*.crt | xargs -n1 basename | sed 's/^/  /'
fi

copy_rust() { # the default toolchain, host target only, and the proxies into the root
    local tc src dst rl t host
    tc=$(RUSTUP_HOME="$rust_home/.rustup" "$rust_home/.cargo/bin/rustup" default 2>/dev/null | awk '{print $1}')
    src=$(readlink -f "$rust_home/.rustup/toolchains/$tc")
    [ -n "$tc" ] && [ -d "$src" ] ||
        { echo "scripts/clean-room.sh: no default rustup toolchain under $rust_home/.rustup" >&2; exit 1; }
    host=$(uname -m)-unknown-linux-gnu
    dst=$root/root/.rustup/toolchains/$tc
    mkdir -p "$root/root/.rustup/toolchains" "$root/root/.cargo"
    printf 'version = "12"\ndefault_toolchain = "%s"\nprofile = "default"\n' "$tc" >"$root/root/.rustup/settings.toml"
    cp -a "$src" "$dst"
    rl=$dst/lib/rustlib
    for t in $(sed -n 's/^rust-std-//p' "$rl/components"); do
        [ "$t" = "$host" ] && continue
        rm -rf "${rl:?}/$t" "$rl/manifest-rust-std-$t"
        sed -i "/^rust-std-$t\$/d" "$rl/components"
    done
    # rustup's own record of what the toolchain holds: the other targets' rust-std out of it too.
    python3 - "$rl/multirust-config.toml" "$host" <<'PY'
import sys
path, host = sys.argv[1], sys.argv[2]
blocks = open(path).read().split("\n\n")
keep = [b for b in blocks if not ('pkg = "rust-std"' in b and f'target = "{host}"' not in b)]
open(path, "w").write("\n\n".join(keep))
PY
    cp -a "$rust_home/.cargo/bin" "$root/root/.cargo/bin"
}
step "Rust: $rust_home/.rustup's default toolchain (host target only) and $rust_home/.cargo/bin, copied"
[ -d "$rust_home/.rustup" ] && [ -x "$rust_home/.cargo/bin/rustup" ] ||
    { echo "scripts/clean-room.sh: no rustup at $rust_home/.rustup and $rust_home/.cargo/bin" >&2; exit 1; }
copy_rust
[ -f "$rust_home/.cargo/env" ] && cp "$rust_home/.cargo/env" "$root/root/.cargo/env"
in_root "$root" rustc --version
in_root "$root" rustup target list --installed | sed 's/^/  target: /'

head=$(git -C "$repo" rev-parse HEAD)
step "cloning $head into /build/vk-layer-echo (and ../shared beside it)"
[ -z "$(git -C "$repo" status --porcelain --untracked-files=no)" ] ||
    echo "NOTE: uncommitted changes here are not in the clean room: it builds $head"
git clone -q --no-checkout "$repo" "$root/build/vk-layer-echo"
git -C "$root/build/vk-layer-echo" checkout -q --detach "$head"
if [ -d "$repo/../shared" ]; then
    mkdir -p "$root/build/shared"
    cp -a "$repo/../shared/." "$root/build/shared/"
fi

status=0
run_inside() { # run_inside NAME COMMAND
    local t0=$SECONDS rc=0
    step "$1 inside"
    in_root "$root" bash -c "cd /build/vk-layer-echo && $2" || rc=$?
    echo "== clean-room: $1: exit status $rc after $((SECONDS - t0)) s"
    timings+=("$1: exit status $rc, $((SECONDS - t0)) s")
    [ "$rc" -eq 0 ] || status=1
}
timings=()
if [ "$test_only" -eq 0 ]; then
    run_inside "scripts/demo.sh" "scripts/demo.sh"
fi
if [ "$demo_only" -eq 0 ]; then
    run_inside "scripts/test.sh" "scripts/test.sh"
fi

step "done"
echo "clean room of $head on $(cut -d' ' -f1-3 /proc/loadavg) load, $(nproc) CPUs:"
printf '  %s\n' "${timings[@]}"
echo "  total (with the base root and the copy): $((SECONDS - start)) s"
exit "$status"
