"""A Taichi (Vulkan backend) program for scripts/third-party.sh: ndarrays filled from NumPy
(`from_numpy`), a kernel over them, and the result read back (`to_numpy`: on lavapipe a copy
into a fresh host-visible staging buffer); a field filled and read the same way. Taichi's
runtime chooses how the bytes move: on lavapipe the uploads make no buffer copy. Writes the
SHA-256 of every result to the file named by the first argument.

    python3 taichi_ndarray.py OUT [MIB=4] [ITERS=4]
"""
import hashlib
import sys

import numpy as np
import taichi as ti

out = sys.argv[1]
mib = int(sys.argv[2]) if len(sys.argv) > 2 else 4
iters = int(sys.argv[3]) if len(sys.argv) > 3 else 4
ti.init(arch=ti.vulkan, offline_cache=False, log_level=ti.WARN)
n = mib << 18  # f32 elements
x = ti.ndarray(ti.f32, n)
y = ti.ndarray(ti.f32, n)
f = ti.field(ti.f32, shape=1024)


@ti.kernel
def saxpy(x: ti.types.ndarray(), y: ti.types.ndarray(), s: ti.f32):
    for i in x:
        y[i] = s * x[i] + y[i]


@ti.kernel
def scale_field(s: ti.f32):
    for i in f:
        f[i] = f[i] * s + 1.0


rng = np.random.default_rng(1)
h = hashlib.sha256()
for it in range(iters):
    x.from_numpy(rng.random(n, dtype=np.float32))
    y.from_numpy(rng.random(n, dtype=np.float32))
    saxpy(x, y, 2.0 + it)
    h.update(y.to_numpy().tobytes())
    f.from_numpy(rng.random(1024, dtype=np.float32))
    scale_field(0.5)
    h.update(f.to_numpy().tobytes())
open(out, "w").write(h.hexdigest() + "\n")
