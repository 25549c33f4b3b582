#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""meson's way into pytest: exits 77 (skip) naming the Debian package when
pytest or numpy is missing, else runs pytest with the arguments given and
exits with its status."""
import sys

missing = []
for module, package in (("pytest", "python3-pytest"), ("numpy", "python3-numpy")):
    try:
        __import__(module)
    except ImportError:
        missing.append(package)
if missing:
    print(f"SKIP: {' and '.join(missing)} not installed (apt-get install {' '.join(missing)}; ./dev test does)")
    sys.exit(77)

import pytest  # noqa: E402

sys.exit(pytest.main(["-p", "no:cacheprovider", "-ra", *sys.argv[1:]]))
