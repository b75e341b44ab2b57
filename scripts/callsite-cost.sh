#!/usr/bin/env bash
# Call-site identity cost (issue 35): instructions per captured call under enforce, echo's
# unwinder against libgcc's (glibc `backtrace()`, what every capture used before), in the same
# release library (`VK_ECHO_CALLSITE_CHECK=reference` takes libgcc's path alone). Writes
# bench/callsite.md, which echo-bench carries into bench/RESULTS.md.
#
#   scripts/callsite-cost.sh
#
# Program: tests/c/c_vkfft (VkFFT, a staging buffer and allocation per transfer, 12 frames of
# the application's below each vkCreateBuffer/vkAllocateMemory), `staging N small`, with a plan
# made by profile + `vkecho analyze` for exactly those arguments. callgrind collects inside
# `callsite::capture_hash` alone (--toggle-collect), everything it runs counted (echo's code,
# the loader's dl_iterate_phdr, libgcc_s); the captures are counted by the layer (the `call
# sites:` info line at vkDestroyDevice). Per capture = the difference of the instructions of
# N=10 and N=2 over the difference of their captures, so the first captures of a process (the
# caches filling, pthread_getattr_np reading /proc/self/maps) cancel — nearly: /proc/self/maps
# is not equally long in two runs (hundreds of thousands of instructions once, a few thousand
# apart), so the difference is spread over 64 captures. The c_calls figure and its
# budget (2,000) are tests/tests/costs.rs's `call_site_capture_instruction_budget`.
set -euo pipefail
cd "$(dirname "$0")/.."
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
cargo build --release -p vk-layer-echo -p echo-cli
cargo build -p echo-tests
R=$(cd "${CARGO_TARGET_DIR:-target}/release" && pwd)
C=$(ls -td "${CARGO_TARGET_DIR:-target}"/debug/build/echo-tests-*/out | while read -r d; do
      [ -x "$d/c_vkfft" ] && { (cd "$d" && pwd); break; }; done)
[ -n "$C" ] || { echo "callsite-cost.sh: c_vkfft not built (scripts/deps.sh)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "callsite-cost.sh: valgrind missing (scripts/deps.sh)" >&2; exit 1; }
export ECHO_C_SPV=$C/c_double.spv
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
scripts/layer-manifest.py "$R/libVkLayer_echo.so" "$tmp/data/vulkan/implicit_layer.d/VkLayer_echo.json"
export XDG_DATA_HOME=$tmp/data XDG_DATA_DIRS=${XDG_DATA_DIRS:-/usr/local/share:/usr/share}

# count N CHECK -> "instructions captures"
count() {
  local n=$1 check=$2
  VK_ECHO_ENABLE=1 VK_ECHO_MODE=enforce VK_ECHO_PLAN="$tmp/plan$n.json" VK_ECHO_LOG=info \
    VK_ECHO_CALLSITE_CHECK=$check valgrind --tool=callgrind \
    --toggle-collect='*callsite*capture_hash*' --callgrind-out-file="$tmp/cg.out" \
    "$C/c_vkfft" staging "$n" small >/dev/null 2>"$tmp/err"
  local ir caps
  ir=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p; s/^summary: *\([0-9]*\).*/\1/p' "$tmp/cg.out" | head -1)
  caps=$(grep -o 'call sites: .*;' "$tmp/err" | tail -1 | grep -o '[0-9]\+ \(captured\|by libgcc\)' |
         awk '{s += $1} END {print s + 0}')
  echo "$ir $caps"
}

for n in 2 10; do
  VK_ECHO_ENABLE=1 VK_ECHO_MODE=profile VK_ECHO_TRACE="$tmp/t$n.jsonl" "$C/c_vkfft" staging "$n" small >/dev/null 2>&1
  "$R/vkecho" analyze "$tmp/t$n.jsonl" -o "$tmp/plan$n.json" >/dev/null
done

rows=""
for check in reference ""; do
  read -r a ca < <(count 2 "$check")
  read -r b cb < <(count 10 "$check")
  [ "$cb" -gt "$ca" ] || { echo "callsite-cost.sh: no captures counted ($ca, $cb):" >&2; cat "$tmp/err" >&2; exit 1; }
  per=$(( (b - a) / (cb - ca) ))
  name=${check:-"echo's unwinder (default)"}
  [ "$check" = reference ] && name="libgcc's \`backtrace()\` (\`VK_ECHO_CALLSITE_CHECK=reference\`, the path before issue 35)"
  rows+="| $name | $ca / $cb | $a / $b | $per |"$'\n'
done

# c_calls (vkCreateBuffer of 2 MiB buffers, 300 against 100 captures): the test's own figure.
calls=$(cargo test -q -p echo-tests --test costs call_site_capture_instruction_budget -- --nocapture 2>&1 |
        sed -n 's/.*: \([0-9]*\) instructions per captured call.*/\1/p' | head -1)

dirty=""
git diff --quiet HEAD -- layer 2>/dev/null || dirty=", with uncommitted changes"
{
  echo "## Call-site identity cost (issue 35)"
  echo
  echo "Written by \`scripts/callsite-cost.sh\` ($(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD)$dirty)."
  echo "Instructions per captured call site under enforce, counted by callgrind inside"
  echo "\`callsite::capture_hash\` alone (\`--toggle-collect\`; everything it runs, libgcc_s and the loader"
  echo "included), release library, \`stack_depth\` 16, in \`c_vkfft staging N small\` (VkFFT: a staging"
  echo "buffer and allocation per transfer), each with its own plan; per capture = (instructions at N=10 −"
  echo "at N=2) / (captures at N=10 − at N=2), so the first captures (caches filling) cancel. Both rows"
  echo "are the same library. The c_calls figure (\`vkCreateBuffer\` of 2 MiB buffers) is checked in the"
  echo "test command: \`tests/tests/costs.rs\`, \`call_site_capture_instruction_budget\`, at most 2,000."
  echo
  echo "| call-site capture | captures (N=2 / N=10) | instructions in capture_hash (N=2 / N=10) | per captured call |"
  echo "|---|---|---|---|"
  printf '%s' "$rows"
  echo
  echo "c_calls, echo's unwinder: ${calls:-?} instructions per captured call (\`cargo test -p echo-tests --test costs"
  echo "call_site_capture_instruction_budget -- --nocapture\`); 19,303 with libgcc's \`backtrace()\` (the library"
  echo "of commit 740dde8, before issue 35)."
} > bench/callsite.md
cat bench/callsite.md
