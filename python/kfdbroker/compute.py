# SPDX-License-Identifier: MIT
"""Compute: GPU code objects loaded through the daemon, their kernels'
argument lists from the code object's metadata, and how Python values
become kernel arguments."""
from __future__ import annotations

import ctypes
import math
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _lib, errors
from ._lib import lib
from .buffer import Buffer, BufferRef

if TYPE_CHECKING:  # pragma: no cover
    from .session import Session

__all__ = ["CodeObject", "Kernel", "KernelArg", "Local"]

_KINDS = {
    _lib.KFDB_KERNEL_ARG_BY_VALUE: "value",
    _lib.KFDB_KERNEL_ARG_GLOBAL_BUFFER: "buffer",
    _lib.KFDB_KERNEL_ARG_DYNAMIC_LDS: "local",
    _lib.KFDB_KERNEL_ARG_HIDDEN: "hidden",
    _lib.KFDB_KERNEL_ARG_UNKNOWN: "unknown",
}

Dims = Union[int, Sequence[int]]


class Local:
    """A ``local`` (LDS) pointer argument: ``nbytes`` of dynamic LDS per workgroup."""

    def __init__(self, nbytes: int):
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or not 0 < nbytes < 2**32:
            raise errors.InvalidArgument(22, f"local size must be 1..{2**32 - 1} bytes, got {nbytes!r}", "Local()")
        self.nbytes = nbytes

    def __repr__(self) -> str:
        return f"kfdbroker.Local({self.nbytes})"


@dataclass(frozen=True)
class KernelArg:
    """One argument of a kernel, from the code object's metadata."""

    name: str
    """The argument's name ("" when the code object does not record names)."""
    offset: int
    """Its offset in the kernel argument segment."""
    size: int
    """Its size in bytes."""
    kind: str
    """``"value"`` (pass a number), ``"buffer"`` (a Buffer), ``"local"`` (a :class:`Local`),
    ``"hidden"`` (filled by the daemon) or ``"unknown"``."""

    def describe(self) -> str:
        what = {"value": f"{self.size}-byte value", "buffer": "buffer", "local": "Local(nbytes)"}.get(
            self.kind, self.kind)
        return f"{self.name}: {what}" if self.name else what


@dataclass(frozen=True)
class Kernel:
    """A kernel of a loaded code object."""

    name: str
    kernarg_size: int
    """Bytes of the kernel argument segment (explicit and hidden arguments)."""
    group_segment_size: int
    """Static LDS bytes per workgroup."""
    private_segment_size: int
    """Scratch bytes per work-item."""
    max_workgroup_size: int
    """Most work-items one workgroup may have."""
    args: Tuple[KernelArg, ...]
    """The explicit arguments, in the order :meth:`Session.dispatch` takes them."""
    all_args: Tuple[KernelArg, ...]
    """Every argument, hidden ones too, in offset order."""

    def signature(self) -> str:
        return f"{self.name}({', '.join(a.describe() for a in self.args)})"


def _read_kernel(kp: int) -> Kernel:
    L = lib()
    all_args: List[KernelArg] = []
    for i in range(L.kfdb_kernel_get_n_args(kp)):
        a = _lib.kfdb_kernel_arg()
        if L.kfdb_kernel_get_arg(kp, i, ctypes.byref(a)) < 0:
            raise errors.ProtocolError(71, f"argument {i} of a kernel could not be read", "load()")
        all_args.append(KernelArg((a.name or b"").decode("utf-8", "replace"), a.offset, a.size,
                                  _KINDS.get(a.kind, "unknown")))
    return Kernel(
        name=L.kfdb_kernel_get_name(kp).decode("utf-8", "replace"),
        kernarg_size=L.kfdb_kernel_get_kernarg_size(kp),
        group_segment_size=L.kfdb_kernel_get_group_segment_size(kp),
        private_segment_size=L.kfdb_kernel_get_private_segment_size(kp),
        max_workgroup_size=L.kfdb_kernel_get_max_workgroup_size(kp),
        args=tuple(a for a in all_args if a.kind != "hidden"),
        all_args=tuple(all_args),
    )


class CodeObject:
    """A GPU code object loaded through the daemon (from :meth:`Session.load`).

    Lives until :meth:`free`, the end of a ``with`` block on it, or the
    session's close. Dispatches already submitted keep its code alive in the
    daemon until they finish.
    """

    def __init__(self, session: "Session", ptr: int, source: str):
        self._session = session
        self._ptr: Optional[int] = ptr
        self.source = source
        """Where it came from: the path, or ``"<bytes>"``."""
        L = lib()
        self.handle: int = L.kfdb_code_object_get_handle(ptr)
        kernels = [_read_kernel(L.kfdb_code_object_get_kernel(ptr, i))
                   for i in range(L.kfdb_code_object_get_n_kernels(ptr))]
        self.kernels: Dict[str, Kernel] = {k.name: k for k in kernels}
        """The kernels by name, in the order the daemon listed them."""

    def __repr__(self) -> str:
        return f"<kfdbroker.CodeObject {self.handle} {self.source} kernels={list(self.kernels)}>"

    def __enter__(self) -> "CodeObject":
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()

    def _checked(self, operation: str) -> int:
        if self._session.closed:
            raise errors.Closed(9, "the session is closed", operation)
        if self._ptr is None:
            raise errors.Closed(9, f"code object {self.handle} ({self.source}) was freed", operation)
        return self._ptr

    def kernel(self, name: str) -> Kernel:
        """The kernel called name, or NotFound listing the ones there are."""
        try:
            return self.kernels[name]
        except (KeyError, TypeError):
            raise errors.NotFound(2, f"no kernel {name!r} in {self.source} (it has: {', '.join(self.kernels)})",
                                  "dispatch()") from None

    def free(self) -> None:
        """Free the code object in the daemon and here. A second call does nothing."""
        if self._ptr is None or self._session.closed:
            self._ptr = None
            return
        ptr, self._ptr = self._ptr, None
        with self._session._lock:
            r = lib().kfdb_code_object_free(ptr)
            if r < 0:
                raise self._session._error(r, f"CodeObject({self.handle}).free()")

    def _released(self) -> None:
        self._ptr = None


def dims(value: Dims, what: str, operation: str) -> List[int]:
    """grid or block as 1 to 3 ints in 1..2**32-1."""
    seq = [value] if not isinstance(value, (tuple, list)) else list(value)
    if not 1 <= len(seq) <= 3:
        raise errors.InvalidArgument(22, f"{what} needs 1 to 3 dimensions, got {len(seq)}", operation)
    out = []
    for d in seq:
        if isinstance(d, bool) or not hasattr(d, "__index__"):
            raise errors.InvalidArgument(22, f"{what} must hold integers, got {d!r}", operation)
        d = d.__index__()
        if not 1 <= d < 2**32:
            raise errors.InvalidArgument(22, f"{what} values must be 1..{2**32 - 1}, got {d}", operation)
        out.append(d)
    return out


def _value_bytes(value: Any, arg: KernelArg, label: str, operation: str) -> bytes:
    """The bytes of a by-value argument of arg.size bytes."""
    size = arg.size
    if isinstance(value, (Buffer, BufferRef, Local)):
        raise errors.InvalidArgument(22, f"{label} is a {size}-byte value, got {value!r}", operation)
    if isinstance(value, (bytes, bytearray, memoryview)):
        b = bytes(value)
        if len(b) != size:
            raise errors.InvalidArgument(22, f"{label} takes {size} bytes, got {len(b)} bytes", operation)
        return b
    if hasattr(value, "dtype") and hasattr(value, "tobytes"):  # a numpy scalar or 0-d array
        shape = getattr(value, "shape", ())
        if shape not in ((), (1,)):
            raise errors.InvalidArgument(22, f"{label} takes one value, got an array of shape {shape}", operation)
        nbytes = value.dtype.itemsize
        if nbytes != size:
            raise errors.InvalidArgument(
                22, f"{label} takes {size} bytes, got numpy.{value.dtype.name} ({nbytes} bytes)", operation)
        return bytes(value.tobytes())
    if isinstance(value, bool) or isinstance(value, int):
        v = int(value)
        if size not in (1, 2, 4, 8):
            raise errors.InvalidArgument(
                22, f"{label} takes {size} bytes: pass bytes or a numpy value of that size, not an int", operation)
        lo, hi = -(2 ** (8 * size - 1)), 2 ** (8 * size) - 1
        if not lo <= v <= hi:
            raise errors.InvalidArgument(22, f"{label} takes {size} bytes: {v} does not fit ({lo}..{hi})", operation)
        return bytes((v & hi).to_bytes(size, "little"))
    if isinstance(value, float):
        if size == 4:
            if math.isfinite(value) and abs(value) > 3.4028234663852886e38:
                raise errors.InvalidArgument(22, f"{label} is a float32: {value} does not fit", operation)
            return bytes(struct.pack("<f", value))
        if size == 8:
            return bytes(struct.pack("<d", value))
        raise errors.InvalidArgument(
            22, f"{label} takes {size} bytes: a Python float fits 4 (float32) or 8 (float64)", operation)
    raise errors.InvalidArgument(
        22, f"{label} is a {size}-byte value: pass an int, a float, a numpy scalar or bytes, "
        f"not {type(value).__name__}", operation)


def pack_args(kernel: Kernel, values: Sequence[Any], session: "Session", operation: str
              ) -> Tuple["ctypes.Array[_lib.kfdb_arg]", List[Any]]:
    """The kfdb_arg array for a dispatch, and the objects it points into (keep them alive)."""
    if len(values) != len(kernel.args):
        raise errors.InvalidArgument(
            22, f"kernel {kernel.signature()} takes {len(kernel.args)} arguments, got {len(values)}", operation)
    arr = (_lib.kfdb_arg * max(len(values), 1))()
    keep: List[Any] = []
    for i, (arg, value) in enumerate(zip(kernel.args, values)):
        label = f"argument {i}{f' ({arg.name})' if arg.name else ''} of {kernel.name}"
        a = arr[i]
        if arg.kind == "value":
            data = _value_bytes(value, arg, label, operation)
            cbuf = ctypes.create_string_buffer(data, len(data))
            keep.append(cbuf)
            a.type, a.value, a.size = _lib.KFDB_ARG_VALUE, ctypes.addressof(cbuf), len(data)
        elif arg.kind == "buffer":
            ref = value if isinstance(value, BufferRef) else BufferRef(value, 0) if isinstance(value, Buffer) else None
            if ref is None:
                raise errors.InvalidArgument(22, f"{label} is a buffer, got {value!r}", operation)
            if ref.buffer._session is not session:
                raise errors.InvalidArgument(22, f"{label}: {ref.buffer!r} belongs to another session", operation)
            a.type, a.buffer, a.offset = _lib.KFDB_ARG_BUFFER, ref.buffer._checked(operation), ref.offset
        elif arg.kind == "local":
            if not isinstance(value, Local):
                raise errors.InvalidArgument(22, f"{label} is a local pointer: pass kfdbroker.Local(nbytes), "
                                             f"got {value!r}", operation)
            a.type, a.local_size = _lib.KFDB_ARG_LOCAL, value.nbytes
        else:
            raise errors.NotSupported(95, f"{label} has a kind this library does not know", operation)
    return arr, keep
