#!/usr/bin/env bash
# The aarch64 fault-direction path on a real Linux kernel (issue 27): boots Debian's arm64
# kernel in qemu-system-aarch64 (-M virt -cpu max, TCG) with an initramfs that holds the
# cross-built aarch64 unit tests (glibc 2.27 build, scripts/cross.sh), Debian's arm64 libc6 and
# libgcc-s1 and busybox-static, and runs the guard's real-instruction test as init, twice:
#
#   esr      ECHO_TEST_REQUIRE_ESR=1: every access (reads, writes, pairs, SIMD, exclusives,
#            LSE atomics, DC ZVA, memcpy/memset) must be classified from ESR_EL1 in the signal
#            frame's esr_context, in the right direction, none unclassified;
#   planted  the same plus ECHO_TEST_IGNORE_ESR=1 (test builds only): the handler ignores the
#            ESR and falls back to the instruction decoder; the test must fail (caught).
#
# Then (unless --quick) the other fault-path tests (profile::watch, enforce::guard) on that
# kernel. Prints one table row per access (kind, want, got, path, correct) and exits non-zero
# unless the esr run is all esr and correct and the planted run is caught.
#
#   scripts/qemu-system.sh            build the unit tests (scripts/cross.sh --unit-tests), run
#   scripts/qemu-system.sh --no-build use the unit-test binary already built
#   scripts/qemu-system.sh --quick    only the esr and planted runs (the short form)
#
# Everything comes from the Debian archive through apt (nothing else is downloaded) and is
# cached under target/qemu-system/: linux-image-<version>-arm64, libc6, libgcc-s1 and
# busybox-static for arm64 (apt-get download, extracted with dpkg-deb, never installed), and
# qemu-system-aarch64: the installed one when there is one; else `apt-get install
# qemu-system-arm` when that removes nothing; else (e.g. a newer qemu-utils is installed that
# the bookworm qemu-system-common would remove) its .debs are downloaded and extracted under
# target/qemu-system/qemu and run from there; cpio (packs the initramfs) through scripts/deps.sh
# when it is missing. Needs root (or passwordless sudo) only for
# `dpkg --add-architecture arm64`, apt-get update and install.
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
quick=0
for a in "$@"; do
    case "$a" in
        --no-build) build=0 ;;
        --quick) quick=1 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "scripts/qemu-system.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
    esac
done

start=$SECONDS
step() { echo "== qemu-system: $* (after $((SECONDS - start)) s)"; }
sudo_cmd() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo -n "$@"
    else
        echo "scripts/qemu-system.sh: needs root (or passwordless sudo) to run: $*" >&2
        exit 1
    fi
}
export DEBIAN_FRONTEND=noninteractive

target=${CARGO_TARGET_DIR:-target}
mkdir -p "$target"
target=$(cd "$target" && pwd)
cache=$target/qemu-system
mkdir -p "$cache/debs" "$cache/arm64debs"
# One run at a time per target directory (the initramfs and serial log are rebuilt in place).
exec 9>"$cache/lock"
flock 9

# ------------------------------------------------------------------ unit tests
if [ "$build" -eq 1 ]; then
    step "aarch64 unit tests (scripts/cross.sh --unit-tests)"
    scripts/cross.sh --unit-tests
fi
unit=$target/aarch64-unknown-linux-gnu/release/vk-layer-echo-unit-tests
[ -x "$unit" ] || { echo "scripts/qemu-system.sh: $unit missing (scripts/cross.sh --unit-tests)" >&2; exit 1; }

# ------------------------------------------------------------------ host tools
# cpio packs the initramfs; a fresh Debian machine does not have it (issue 34).
step "host packages (cpio)"
ECHO_EXTRA_PACKAGES="cpio ${ECHO_EXTRA_PACKAGES:-}" scripts/deps.sh

# ------------------------------------------------------------------ qemu-system-aarch64
step "qemu-system-aarch64"
qemu=() # the command
if command -v qemu-system-aarch64 >/dev/null; then
    qemu=(qemu-system-aarch64)
elif [ -x "$cache/qemu/usr/bin/qemu-system-aarch64" ]; then
    :
elif sudo_cmd apt-get install -y -qq --no-install-recommends --no-remove qemu-system-arm >&2 &&
    command -v qemu-system-aarch64 >/dev/null; then
    qemu=(qemu-system-aarch64)
else
    # Not installable without removing something: the packages apt would install, extracted.
    echo "scripts/qemu-system.sh: qemu-system-arm not installable here without removing a package; extracting its .debs under $cache/qemu" >&2
    pkgs=$(apt-get install -s --no-install-recommends qemu-system-arm 2>/dev/null | awk '/^Inst/{print $2}')
    [ -n "$pkgs" ] || { echo "scripts/qemu-system.sh: apt found no qemu-system-arm" >&2; exit 1; }
    # shellcheck disable=SC2086
    (cd "$cache/debs" && apt-get download $pkgs >&2)
    rm -rf "$cache/qemu.new" && mkdir "$cache/qemu.new"
    for d in "$cache"/debs/*.deb; do dpkg-deb -x "$d" "$cache/qemu.new"; done
    mv "$cache/qemu.new" "$cache/qemu"
fi
if [ ${#qemu[@]} -eq 0 ]; then
    q=$cache/qemu
    export LD_LIBRARY_PATH="$q/usr/lib/x86_64-linux-gnu:$q/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    qemu=("$q/usr/bin/qemu-system-aarch64" -L "$q/usr/share/qemu")
fi
"${qemu[@]}" --version | head -1

# ------------------------------------------------------------------ arm64 kernel and libraries
step "arm64 kernel, libc6, libgcc-s1, busybox-static (apt-get download, cached)"
a=$cache/arm64debs
have() { compgen -G "$a/$1_*_arm64.deb" >/dev/null; }
if ! have linux-image-* || ! have libc6 || ! have libgcc-s1 || ! have busybox-static; then
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        sudo_cmd dpkg --add-architecture arm64
        sudo_cmd apt-get update -qq
    fi
    apt-cache show linux-image-arm64:arm64 >/dev/null 2>&1 || sudo_cmd apt-get update -qq
    kpkg=$(apt-cache depends linux-image-arm64:arm64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
    [ -n "$kpkg" ] || { echo "scripts/qemu-system.sh: no linux-image-<version>-arm64 found" >&2; exit 1; }
    rm -f "$a"/*.deb
    (cd "$a" && apt-get download "$kpkg" libc6:arm64 libgcc-s1:arm64 busybox-static:arm64 >&2)
fi
kdeb=$(compgen -G "$a/linux-image-*_arm64.deb" | head -1)
kernel=$cache/vmlinuz
if [ ! -f "$kernel" ] || [ "$kdeb" -nt "$kernel" ]; then
    rm -rf "$cache/k" && mkdir "$cache/k"
    dpkg-deb --fsys-tarfile "$kdeb" | tar -x -C "$cache/k" --wildcards './boot/vmlinuz-*'
    mv "$cache"/k/boot/vmlinuz-* "$kernel.new"
    # Debian's arm64 vmlinuz is a plain Image (bookworm) or gzip'd (older): -kernel wants Image.
    if gzip -t "$kernel.new" 2>/dev/null; then
        gzip -dc "$kernel.new" >"$kernel" && rm -f "$kernel.new"
    else
        mv "$kernel.new" "$kernel"
    fi
    touch "$kernel" # newer than the .deb: not extracted again
    basename "$kdeb" >"$cache/kernel-package"
    rm -rf "$cache/k"
fi
echo "kernel: $(cat "$cache/kernel-package")"

# ------------------------------------------------------------------ initramfs
step "initramfs"
root=$cache/initramfs
rm -rf "$root" && mkdir -p "$root"/{bin,proc,sys,dev,tmp}
for d in "$a"/libc6_*.deb "$a"/libgcc-s1_*.deb "$a"/busybox-static_*.deb; do
    dpkg-deb -x "$d" "$root"
done
rm -rf "$root/usr/share" "$root/usr/lib/aarch64-linux-gnu/gconv"
cp "$unit" "$root/unit-tests"
# Everything the binary needs must be there (from libc6 / libgcc-s1).
readelf=$(command -v aarch64-linux-gnu-readelf || command -v readelf)
for lib in $("$readelf" -d "$unit" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    compgen -G "$root/lib/aarch64-linux-gnu/$lib" >/dev/null ||
        compgen -G "$root/usr/lib/aarch64-linux-gnu/$lib" >/dev/null ||
        { echo "scripts/qemu-system.sh: $lib (NEEDED by the unit tests) is not in the initramfs" >&2; exit 1; }
done
test_name=profile::watch::tests::aarch64_real_instructions_are_classified
cat >"$root/init" <<EOF
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sys /sys
/bin/busybox mount -t devtmpfs dev /dev
/bin/busybox mount -t tmpfs tmp /tmp
export PATH=/bin TMPDIR=/tmp HOME=/tmp
echo "QEMUSYS kernel \$(/bin/busybox uname -r) \$(/bin/busybox grep -m1 Features /proc/cpuinfo)"
run() {
    name=\$1; shift
    echo "QEMUSYS-RUN \$name begin"
    /bin/busybox env "\$@" 2>&1
    echo "QEMUSYS-RUN \$name rc=\$?"
}
run esr ECHO_TEST_REQUIRE_ESR=1 /unit-tests $test_name --exact --nocapture --test-threads=1
run planted ECHO_TEST_REQUIRE_ESR=1 ECHO_TEST_IGNORE_ESR=1 /unit-tests $test_name --exact --nocapture --test-threads=1
if [ $quick -eq 0 ]; then
    run fault-path-tests /unit-tests profile::watch:: enforce::guard:: --test-threads=1
fi
echo "QEMUSYS done"
/bin/busybox poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1 >"$cache/initramfs.cpio.gz")
echo "initramfs: $(du -h "$cache/initramfs.cpio.gz" | cut -f1)"

# ------------------------------------------------------------------ boot
step "boot (qemu-system-aarch64 -M virt -cpu max)"
log=$cache/serial.log
boot_start=$SECONDS
set +e
timeout "${ECHO_QEMU_SYSTEM_TIMEOUT:-900}" "${qemu[@]}" -M virt -cpu max,pauth-impdef=on -smp 1 -m 1G \
    -nographic -nic none -no-reboot -kernel "$kernel" -initrd "$cache/initramfs.cpio.gz" \
    -append "console=ttyAMA0 panic=-1 quiet" </dev/null >"$log" 2>&1
qrc=$?
set -e
tr -d '\r' <"$log" >"$log.txt" && mv "$log.txt" "$log"
echo "qemu exit status $qrc after $((SECONDS - boot_start)) s; serial output: $log"

# ------------------------------------------------------------------ summary
step "summary"
status=0
python3 - "$log" "$quick" <<'PY' || status=$?
import re, sys
log, quick = open(sys.argv[1], errors="replace").read().splitlines(), sys.argv[2] == "1"
runs, cur = {}, None
kernel = next((l for l in log if l.startswith("QEMUSYS kernel")), None)
for l in log:
    m = re.match(r"QEMUSYS-RUN (\S+) (begin|rc=(\d+))", l)
    if m:
        if m.group(2) == "begin":
            cur = m.group(1); runs[cur] = {"cases": [], "rc": None, "out": []}
        else:
            runs[m.group(1)]["rc"] = int(m.group(3)); cur = None
        continue
    if cur:
        runs[cur]["out"].append(l)
        # (libtest's "test <name> ... " may precede the first one on the console)
        m = re.search(r'ACCESSPATH kind=(\S+) want=(\S+) got=(\S+) path=(\S+) fault="(.*)"', l)
        if m:
            runs[cur]["cases"].append(dict(zip(("kind", "want", "got", "path", "fault"), m.groups())))
ok = True
print(kernel or "no kernel line: the guest did not reach init")
if "QEMUSYS done" not in log:
    print("the guest did not finish (see the serial log)"); ok = False
esr = runs.get("esr", {"cases": [], "rc": None})
print(f"\n{'access':<20} {'kind':<18} {'want':<6} {'got':<10} {'path':<13} correct")
for c in esr["cases"]:
    # An atomic is a read-modify-write: its read reported first, then its write, is right.
    rmw_ok = c["kind"] == "atomic" and c["got"] == "read+write"
    good = (c["got"] == c["want"] or rmw_ok) and c["path"] == "esr"
    ok &= good
    print(f"{c['fault']:<20} {c['kind']:<18} {c['want']:<6} {c['got']:<10} {c['path']:<13} {'yes' if good else 'NO'}")
kinds = {c["kind"] for c in esr["cases"]}
missing = {"read", "write", "pair", "simd", "atomic", "dc-zva"} - kinds
paths = [c["path"] for c in esr["cases"]]
print(f"esr run: {len(paths)} accesses, esr {paths.count('esr')}, decoder {paths.count('decoder')}, "
      f"unclassified {paths.count('unclassified')}, test exit status {esr['rc']}")
if missing:
    print(f"esr run: kinds not exercised: {sorted(missing)}"); ok = False
if esr["rc"] != 0 or not paths:
    ok = False
pl = runs.get("planted", {"cases": [], "rc": None})
pp = [c["path"] for c in pl["cases"]]
caught = pl["rc"] not in (None, 0) and any(p != "esr" for p in pp)
print(f"planted run (ESR ignored): {len(pp)} accesses, esr {pp.count('esr')}, decoder {pp.count('decoder')}, "
      f"unclassified {pp.count('unclassified')}, test exit status {pl['rc']}: {'caught' if caught else 'NOT CAUGHT'}")
ok &= caught
if not quick:
    fp = runs.get("fault-path-tests", {"rc": None, "out": []})
    res = [l for l in fp["out"] if l.startswith("test result:")]
    print(f"other fault-path tests (profile::watch, enforce::guard): {res[-1] if res else 'no result'}")
    ok &= fp["rc"] == 0
print("QEMU-SYSTEM " + ("PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
step "done"
exit "$status"
