# An ML runtime's Vulkan backend in its usual use: ncnn (PyPI wheel) running a small
# convolutional network on the GPU, one inference per iteration, input uploaded and output read
# back by ncnn itself (its staging and blob allocators sub-allocate from large mapped blocks).
# The network is written here (param text + weights from a fixed seed), so nothing is downloaded.
# Prints one line per iteration (the output's SHA-256) and the whole run's digest.
#
#   python ncnn_convnet.py [SIZE] [ITERS]     SIZE: input width = height (default 256)
import hashlib
import os
import struct
import sys
import tempfile

import ncnn
import numpy as np

size = int(sys.argv[1]) if len(sys.argv) > 1 else 256
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 4
rng = np.random.default_rng(7)

# Input 16×size×size → conv3x3 32 + ReLU → conv3x3 32 + ReLU → conv1x1 16.
layers = []
weights = []


def conv(name, bottom, top, cin, cout, k):
    w = (rng.standard_normal((cout, cin, k, k)) * (1.0 / np.sqrt(cin * k * k))).astype(np.float32)
    b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
    layers.append(
        f"Convolution {name} 1 1 {bottom} {top} 0={cout} 1={k} 4={k // 2} 5=1 6={w.size}"
    )
    weights.append(struct.pack("<I", 0) + w.tobytes() + b.tobytes())


layers.append(f"Input data 0 1 data 0={size} 1={size} 2=16")
conv("conv1", "data", "c1", 16, 32, 3)
layers.append("ReLU relu1 1 1 c1 r1")
conv("conv2", "r1", "c2", 32, 32, 3)
layers.append("ReLU relu2 1 1 c2 r2")
conv("conv3", "r2", "out", 32, 16, 1)
blobs = len(layers)  # one top per layer
param = "7767517\n%d %d\n%s\n" % (len(layers), blobs, "\n".join(layers))

with tempfile.TemporaryDirectory() as d:
    pp, bp = os.path.join(d, "net.param"), os.path.join(d, "net.bin")
    open(pp, "w").write(param)
    open(bp, "wb").write(b"".join(weights))
    net = ncnn.Net()
    net.opt.use_vulkan_compute = True
    # Full precision, so the output does not depend on which fp16 paths a driver offers.
    net.opt.use_fp16_packed = False
    net.opt.use_fp16_storage = False
    net.opt.use_fp16_arithmetic = False
    if net.load_param(pp) != 0 or net.load_model(bp) != 0:
        sys.exit("ncnn_convnet: the network did not load")
    total = hashlib.sha256()
    for it in range(iters):
        x = np.random.default_rng(100 + it).standard_normal((16, size, size)).astype(np.float32)
        ex = net.create_extractor()
        ex.input("data", ncnn.Mat(x))
        ret, out = ex.extract("out")
        if ret != 0:
            sys.exit(f"ncnn_convnet: extract failed ({ret})")
        y = np.array(out)
        h = hashlib.sha256(y.tobytes()).hexdigest()
        total.update(y.tobytes())
        print(f"iteration {it}: {y.shape} {h[:16]}")
    print(f"digest {total.hexdigest()}")
