# SPDX-License-Identifier: MIT
"""The ctypes structs of kfdbroker/_lib.py have the layout of kfdbroker.h:
every size and field offset as the C compiler gives them (abi-layout.c,
built by meson; its path in KFDBROKER_TEST_ABI_LAYOUT)."""
import ctypes
import json
import os
import subprocess

import pytest

from kfdbroker import _lib


@pytest.fixture(scope="module")
def layout():
    exe = os.environ.get("KFDBROKER_TEST_ABI_LAYOUT") or os.path.join(
        os.path.dirname(__file__), "..", "..", "build", "python", "abi-layout")
    if not os.access(exe, os.X_OK):
        pytest.fail(f"no abi-layout program at {exe} (run through meson test)")
    return json.loads(subprocess.run([exe], check=True, capture_output=True, text=True).stdout)


@pytest.mark.parametrize("struct", _lib.STRUCTS, ids=lambda s: s.__name__)
def test_struct_layout_matches_the_header(layout, struct):
    c = layout[struct.__name__]
    mine = {name: getattr(struct, name).offset for name, _ in struct._fields_}
    assert mine == c["fields"], f"{struct.__name__}: ctypes offsets {mine}, C offsets {c['fields']}"
    assert ctypes.sizeof(struct) == c["size"]


def test_enums_are_ints(layout):
    assert layout["enum_size"] == ctypes.sizeof(ctypes.c_int)


def test_every_struct_is_checked(layout):
    assert sorted(s.__name__ for s in _lib.STRUCTS) == sorted(k for k in layout if k != "enum_size")
