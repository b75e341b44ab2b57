#!/usr/bin/env bash
# Third-party programs under echo (not part of this repository's code): every build is also tried
# on programs other people wrote. Each program runs without echo, then with echo in mode off,
# profile (a trace analyzed by `vkecho analyze`), enforce with that plan, and auto mode twice
# (profile, then enforce), every run bounded by a timeout; its output must be byte-identical to
# the run without echo. Prints one line per run and the analyzer's copy summary, and exits
# non-zero when a run fails, hangs or changes the output.
#
#   scripts/third-party.sh              ffmpeg's Vulkan filters, a wgpu-py compute program, an
#                                       ncnn (ML runtime) network and a Taichi program
#   scripts/third-party.sh ffmpeg       one of them (ffmpeg | wgpu-py | ncnn | taichi)
#
# Installs what it needs (as root): Debian's ffmpeg (its Vulkan filters: hwupload, scale_vulkan,
# gblur_vulkan, hwdownload) and, in a venv under target/third-party, wgpu-py (wgpu-native), ncnn,
# Taichi and numpy from PyPI. Not run by scripts/test.sh (downloads ~220 MB); results:
# docs/third-party.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
target="${CARGO_TARGET_DIR:-target}"
which="${1:-all}"

export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
cargo build -q -p vk-layer-echo -p echo-cli
work="$target/third-party"
mkdir -p "$work/layer"
cp "$target/debug/libVkLayer_echo.so" "$work/layer/"
sed 's#"library_path": "libVkLayer_echo.so"#"library_path": "./libVkLayer_echo.so"#' \
    manifest/VkLayer_echo.json > "$work/layer/VkLayer_echo.json"
vkecho="$root/$target/debug/vkecho"
layer_env=(VK_ADD_LAYER_PATH="$root/$work/layer" VK_INSTANCE_LAYERS=VK_LAYER_echo
    VK_ECHO_CACHE_DIR="$root/$work/cache")
failed=0

# run NAME OUTFILE -- CMD...: runs CMD in every configuration; compares OUTFILE's bytes.
run_all() {
    local name="$1" out="$2"; shift 3
    local dir="$work/$name" base="" sum
    rm -rf "$dir" "$work/cache"; mkdir -p "$dir"
    one() { # LABEL ENV... -- (runs "$@" of run_all)
        local label="$1"; shift
        if ! env "$@" timeout 300 "${cmd[@]}" > "$dir/$label.log" 2>&1; then
            echo "  $name $label: FAILED or timed out (log: $dir/$label.log)"; failed=1; return
        fi
        sum=$(md5sum < "$out" | cut -c1-16)
        if [ -z "$base" ]; then base=$sum; fi
        if [ "$sum" = "$base" ]; then
            echo "  $name $label: output $sum identical"
        else
            echo "  $name $label: output $sum DIFFERS from $base"; failed=1
        fi
    }
    cmd=("$@")
    one none VK_ECHO_DISABLE=1
    one off "${layer_env[@]}" VK_ECHO_MODE=off
    one profile "${layer_env[@]}" VK_ECHO_MODE=profile VK_ECHO_TRACE="$root/$dir/trace.jsonl"
    if "$vkecho" analyze "$dir/trace.jsonl" -o "$dir/plan.json" > "$dir/analyze.txt" 2>&1; then
        sed -n '2p;/^copies:/,/^$/{/^$/!p}' "$dir/analyze.txt" | sed 's/^/    /'
    else
        echo "  $name analyze: FAILED ($dir/analyze.txt)"; failed=1
    fi
    one enforce "${layer_env[@]}" VK_ECHO_MODE=enforce VK_ECHO_PLAN="$root/$dir/plan.json"
    one auto-1 "${layer_env[@]}" VK_ECHO_MODE=auto
    one auto-2 "${layer_env[@]}" VK_ECHO_MODE=auto
}

# venv_with PACKAGE: the venv under $work (in $venv) with PACKAGE (its PyPI name is its module's
# name) and numpy, installed from PyPI when missing.
venv="$work/venv"
venv_with() {
    if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import $1, numpy" 2> /dev/null; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q "$1" numpy
    fi
}

if [ "$which" = all ] || [ "$which" = ffmpeg ]; then
    if ! ffmpeg -hide_banner -filters 2>/dev/null | grep -q gblur_vulkan; then
        if [ "$(id -u)" = 0 ]; then
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ffmpeg > /dev/null
        else
            echo "third-party.sh: ffmpeg with Vulkan filters is missing (apt-get install ffmpeg as root)" >&2; exit 2
        fi
    fi
    echo "== ffmpeg $(ffmpeg -version | head -1 | cut -d' ' -f3): hwupload → scale_vulkan → gblur_vulkan → hwdownload, 720p, 6 frames"
    out="$root/$work/ffmpeg.yuv"
    run_all ffmpeg "$out" -- ffmpeg -hide_banner -loglevel error -init_hw_device vulkan=vk:0 \
        -filter_hw_device vk -f lavfi -i testsrc=size=1280x720:rate=30 -frames:v 6 \
        -vf "format=yuv420p,hwupload,scale_vulkan=w=640:h=360,gblur_vulkan,hwdownload,format=yuv420p" \
        -f rawvideo -y "$out"
fi

if [ "$which" = all ] || [ "$which" = wgpu-py ]; then
    venv_with wgpu
    echo "== wgpu-py $("$venv/bin/python" -c 'import wgpu; print(wgpu.__version__)') (wgpu-native): tests/data/wgpu_py_saxpy.py, 4 MiB, 4 iterations"
    out="$root/$work/wgpu-py.txt"
    run_all wgpu-py "$out" -- sh -c "\"$root/$venv/bin/python\" \"$root/tests/data/wgpu_py_saxpy.py\" > \"$out\""
fi

if [ "$which" = all ] || [ "$which" = ncnn ]; then
    venv_with ncnn
    echo "== ncnn $("$venv/bin/python" -c 'import ncnn; print(ncnn.__version__)' 2> /dev/null) (Vulkan compute): tests/data/ncnn_convnet.py, 3 convolutions on 16×256×256, 4 inferences"
    out="$root/$work/ncnn.txt"
    run_all ncnn "$out" -- sh -c "\"$root/$venv/bin/python\" \"$root/tests/data/ncnn_convnet.py\" 256 4 > \"$out\""
fi

if [ "$which" = all ] || [ "$which" = taichi ]; then
    venv_with taichi
    echo "== taichi $("$venv/bin/python" -c 'import taichi; print(".".join(map(str, taichi.__version__)))' 2> /dev/null | tail -1) (Vulkan backend): tests/data/taichi_ndarray.py, ndarrays of 4 MiB and a field, 4 iterations"
    out="$root/$work/taichi.txt"
    run_all taichi "$out" -- "$root/$venv/bin/python" "$root/tests/data/taichi_ndarray.py" "$out" 4 4
fi

if [ "$failed" -ne 0 ]; then
    echo "== FAILED"; exit 1
fi
echo "== every run finished with the output of the run without echo"
