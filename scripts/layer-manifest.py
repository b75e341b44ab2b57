#!/usr/bin/env python3
"""Writes the committed manifest (manifest/VkLayer_echo.json) for one build of the layer:
library_path = LIB. The measuring scripts install echo this way, as an implicit layer of their
own XDG_DATA_HOME (enabled per process by VK_ECHO_ENABLE=1) or, with --explicit, as an explicit
layer that only the VkInstances naming it load (VK_ADD_LAYER_PATH; enable_environment and
disable_environment belong to implicit layers and are left out).

usage: scripts/layer-manifest.py LIB OUT [--explicit]
"""
import json
import os
import sys


def main():
    args = [a for a in sys.argv[1:] if a != "--explicit"]
    if len(args) != 2:
        raise SystemExit(__doc__)
    lib, out = args
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "manifest", "VkLayer_echo.json")) as f:
        m = json.load(f)
    m["layer"]["library_path"] = os.path.abspath(lib)
    if "--explicit" in sys.argv[1:]:
        for k in ("enable_environment", "disable_environment"):
            m["layer"].pop(k, None)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(m, f)


if __name__ == "__main__":
    main()
