#!/usr/bin/env bash
# Installs a VK_LAYER_echo .deb, checks it, removes it, and checks that nothing is left
# (tests/tests/cross.rs runs it; issue 13).
#
#   tests/scripts/deb-install.sh DEB SAMPLES [RUNNER...]
#
# DEB      the package (scripts/package.sh)
# SAMPLES  an echo-samples binary of the package's architecture (profile-then-enforce with the
#          installed layer, auto mode: the README's "On a Jetson" flow)
# RUNNER   how to run that architecture's programs here (arm64: qemu-aarch64-static -L /)
#
# The machine is not changed: everything runs in a private mount namespace whose /usr, /etc and
# /var are overlays on scratch directories (dpkg's database included). Where that cannot be set
# up (no unshare/overlayfs) it installs on the machine itself and removes it again, and says so.
# Prints one "OK: ..." line per check; a failed check prints "FAIL: ..." and exits 1.
set -euo pipefail

deb=$1
samples=$2
shift 2
runner=("$@")

fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "OK: $*"; }

[ "$(id -u)" -eq 0 ] || fail "installing a package needs root (run the tests as root)"
[ -f "$deb" ] || fail "no package at $deb (scripts/cross.sh builds it)"

if [ "${ECHO_DEB_SANDBOX:-}" != inside ]; then
    if unshare --mount --propagation private true 2>/dev/null; then
        exec unshare --mount --propagation private env ECHO_DEB_SANDBOX=inside "$0" "$deb" "$samples" "${runner[@]}"
    fi
    echo "NOTE: no private mount namespace here: installing on this machine itself (and removing it)"
    ECHO_DEB_SANDBOX=none
fi

scratch=$(mktemp -d /tmp/echo-deb-XXXXXX)
cleanup() { rm -rf "$scratch" 2>/dev/null || true; }
if [ "$ECHO_DEB_SANDBOX" = inside ]; then
    for d in usr etc var; do
        mkdir -p "$scratch/$d.up" "$scratch/$d.work"
        if ! mount -t overlay overlay \
            -o "lowerdir=/$d,upperdir=$scratch/$d.up,workdir=$scratch/$d.work" "/$d" 2>"$scratch/mount.err"; then
            # No overlayfs: a namespace alone does not protect the machine.
            fail "cannot mount an overlay on /$d ($(cat "$scratch/mount.err")); rerun with ECHO_DEB_SANDBOX=none to install on this machine"
        fi
    done
    ok "sandbox: /usr, /etc and /var are overlays in a private mount namespace"
fi
trap cleanup EXIT

arch=$(dpkg-deb -f "$deb" Architecture)
case "$arch" in
    arm64) triplet=aarch64-linux-gnu ;;
    amd64) triplet=x86_64-linux-gnu ;;
    *) fail "unexpected architecture $arch" ;;
esac
lib=/usr/lib/$triplet/libVkLayer_echo.so
manifest=/usr/share/vulkan/implicit_layer.d/VkLayer_echo.json
cli=/usr/bin/vkecho

dpkg-query -W -f='${Status}' vk-layer-echo 2>/dev/null | grep -q 'install ok installed' &&
    fail "vk-layer-echo is already installed on this machine"
for f in "$lib" "$manifest" "$cli"; do
    [ ! -e "$f" ] || fail "$f exists before the install"
done

snapshot() {
    find /usr /etc /var/lib/dpkg -xdev \( -type f -o -type l \) -print 2>/dev/null |
        grep -v -e '^/var/lib/dpkg/[^/]*-old$' -e '^/var/lib/dpkg/updates/' -e '^/var/lib/dpkg/lock' \
            -e '^/var/lib/dpkg/triggers/' | sort
}
snapshot >"$scratch/before"

# A private world for the programs: no user settings, caches or layers of this machine.
home=$scratch/home
mkdir -p "$home"
run_env=(env -i PATH=/usr/bin:/bin HOME="$home" XDG_RUNTIME_DIR="$scratch" XDG_CACHE_HOME="$home/cache"
    XDG_DATA_HOME="$home/data" XDG_CONFIG_HOME="$home/config")
if [ "$arch" = arm64 ]; then
    # Only the arm64 driver: the loader of an arm64 program cannot use the amd64 ones.
    run_env+=(VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.aarch64.json)
fi

# ------------------------------------------------------------------ install
dpkg -i "$deb" >"$scratch/dpkg-i.log" 2>&1 || { cat "$scratch/dpkg-i.log"; fail "dpkg -i $deb"; }
ok "installed $(dpkg-query -W -f='${Package} ${Version} ${Architecture}' vk-layer-echo)"
for f in "$lib" "$manifest" "$cli"; do
    [ -f "$f" ] || fail "$f missing after the install"
done
grep -q '"library_path": "libVkLayer_echo.so"' "$manifest" || fail "the manifest does not name the bare library"
ok "files: $lib, $manifest, $cli"

# ------------------------------------------------------------------ vkecho doctor
"${run_env[@]}" "${runner[@]}" "$cli" doctor --json >"$scratch/doctor.json" 2>"$scratch/doctor.err" || true
python3 - "$scratch/doctor.json" "$manifest" "$lib" "$arch" <<'EOF' || { cat "$scratch/doctor.err"; fail "vkecho doctor"; }
import json, os, sys
path, manifest, lib, arch = sys.argv[1:]
d = json.load(open(path))
e = d["echo"]
ms = e["manifests"]
assert e["installed"] and ms, f"doctor does not find the layer: {e}"
m = ms[0]
assert m["path"] == manifest, m
# /lib is /usr/lib on a merged-/usr system: the same file.
assert m["library_found"] and os.path.realpath(m["library"]) == os.path.realpath(lib), m
assert e["seen_by_loader"], "the loader does not list VK_LAYER_echo"
devs = d["devices"]
assert devs, "no Vulkan device"
assert any(x["class"] == "uma-strict" for x in devs), devs
probe = e["load_probe"] or {}
if arch == "amd64":
    assert probe.get("loaded") is True, probe
    verdict = "the layer loads in doctor's probe process"
else:
    # qemu-user cannot exec a foreign binary, so doctor's probe child cannot start here (on
    # the Jetson it does); the samples below load the layer for real.
    err = str(probe.get("error", ""))
    assert probe.get("loaded") is True or "Exec format error" in err or "os error 8" in err \
        or "exit status: 127" in err, probe
    verdict = "probe child: " + ("loaded" if probe.get("loaded") else "not startable under qemu-user")
print(f"doctor: manifest {m['path']}, library {m['library']}, seen by the loader, "
      f"device class {devs[0]['class']}; {verdict}")
EOF
ok "vkecho doctor finds the layer ($(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["loader"].get("version","?"))' "$scratch/doctor.json") loader)"

# ------------------------------------------------------------------ one program, auto mode
sample_args=(saxpy --size-kib 256 --iters 2)
checksum() { sed -n 's/.*"checksum":"\([0-9a-f]*\)".*/\1/p' "$1" | tail -1; }
# With log=info an echo that loaded would say so.
"${run_env[@]}" VK_ECHO_LOG=info "${runner[@]}" "$samples" "${sample_args[@]}" >"$scratch/off.out" 2>"$scratch/off.err" ||
    { cat "$scratch/off.err"; fail "the sample without the layer"; }
grep -q 'VK_LAYER_echo' "$scratch/off.err" && fail "the layer acted without VK_ECHO_ENABLE"
for run in 1 2; do
    "${run_env[@]}" VK_ECHO_ENABLE=1 VK_ECHO_LOG=info VK_ECHO_MIN_BYTES=4096 \
        "${runner[@]}" "$samples" "${sample_args[@]}" >"$scratch/auto$run.out" 2>"$scratch/auto$run.err" ||
        { cat "$scratch/auto$run.err"; fail "auto run $run"; }
    [ "$(checksum "$scratch/auto$run.out")" = "$(checksum "$scratch/off.out")" ] ||
        fail "auto run $run changed the output"
done
grep -q 'auto mode: no plan' "$scratch/auto1.err" && grep -q 'auto mode: plan .* written' "$scratch/auto1.err" ||
    { cat "$scratch/auto1.err"; fail "the first enabled run did not profile and plan"; }
grep -q 'auto mode: no plan' "$scratch/auto2.err" && { cat "$scratch/auto2.err"; fail "the second enabled run profiled again"; }
applied=$(sed -n 's/.*enforce on .*: \([0-9]*\/[0-9]*\) groups applied.*/\1/p' "$scratch/auto2.err" | head -1)
case "$applied" in
    "" | 0/* ) cat "$scratch/auto2.err"; fail "nothing applied in the enforced run" ;;
esac
ok "VK_ECHO_ENABLE=1, auto mode: run 1 profiled, run 2 enforced ($applied groups applied), checksum $(checksum "$scratch/off.out") unchanged"
"${run_env[@]}" VK_ECHO_ENABLE=1 VK_ECHO_DISABLE=1 VK_ECHO_LOG=info "${runner[@]}" "$samples" "${sample_args[@]}" \
    >"$scratch/dis.out" 2>"$scratch/dis.err" || fail "the disabled run"
grep -q 'VK_LAYER_echo' "$scratch/dis.err" && fail "VK_ECHO_DISABLE=1 did not switch the layer off"
ok "VK_ECHO_DISABLE=1 switches it off"

# ------------------------------------------------------------------ vkecho selftest (issue 46)
# The field kit from the installed package: a verdict, exit 0, and the bundle. Under qemu-user
# (arm64) a foreign binary cannot start another, so the selftest starts its children through
# the same runner (VKECHO_SELFTEST_RUNNER), and runs two workloads with one timed round: every
# run is emulated.
selftest_args=(--quick)
selftest_env=()
if [ ${#runner[@]} -gt 0 ]; then
    selftest_args+=(--workloads upload,race --rounds 1)
    selftest_env=(VKECHO_SELFTEST_RUNNER="${runner[*]}")
fi
mkdir -p "$scratch/selftest"
st=0
(cd "$home" && "${run_env[@]}" "${selftest_env[@]}" "${runner[@]}" "$cli" selftest "${selftest_args[@]}" \
    --out "$scratch/selftest" >"$scratch/selftest.out" 2>"$scratch/selftest.err") || st=$?
verdict=$(head -1 "$scratch/selftest.out")
[ "$st" -eq 0 ] && case "$verdict" in "echo is safe on "*) true ;; *) false ;; esac ||
    { cat "$scratch/selftest.out" "$scratch/selftest.err"; fail "vkecho selftest (exit $st): $verdict"; }
bundle=$(ls "$scratch"/selftest/selftest-*.tar.gz 2>/dev/null | head -1)
[ -n "$bundle" ] || fail "vkecho selftest wrote no bundle"
tar -C "$scratch/selftest" -xzf "$bundle"
for f in selftest.json doctor.json versions.json device-0/upload/plan.json device-0/upload/show.html \
    device-0/race/profile.trace.jsonl; do
    [ -f "$scratch/selftest/$(basename "$bundle" .tar.gz)/$f" ] || fail "the selftest bundle lacks $f"
done
if grep -rqF "$home" "$scratch/selftest/$(basename "$bundle" .tar.gz)"; then
    fail "the selftest bundle holds a home-directory path ($home)"
fi
ok "vkecho selftest from the package: $verdict; bundle $(basename "$bundle")"

# ------------------------------------------------------------------ remove
dpkg --purge vk-layer-echo >"$scratch/dpkg-p.log" 2>&1 || { cat "$scratch/dpkg-p.log"; fail "dpkg --purge"; }
for f in "$lib" "$manifest" "$cli" /usr/share/doc/vk-layer-echo; do
    [ ! -e "$f" ] || fail "$f is left after removal"
done
snapshot >"$scratch/after"
if ! diff "$scratch/before" "$scratch/after" >"$scratch/diff"; then
    sed -n 's/^> /LEFTOVER: /p; s/^< /GONE: /p' "$scratch/diff"
    fail "the removal did not restore the file list"
fi
ok "removed (purge): no file added or lost under /usr, /etc, /var/lib/dpkg"
