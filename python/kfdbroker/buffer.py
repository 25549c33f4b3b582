# SPDX-License-Identifier: MIT
"""GPU buffers: memory the daemon allocated on the GPU and handed over as a
dma-buf, which this process maps and reads and writes directly."""
from __future__ import annotations

import mmap
import operator
from typing import TYPE_CHECKING, Any, Optional, Sequence, Tuple, Union

from . import _lib, errors
from ._lib import lib

if TYPE_CHECKING:  # pragma: no cover
    import numpy

    from .session import Session

__all__ = ["Buffer", "BufferRef"]

Shape = Union[int, Sequence[int]]


def _index(value: Any, what: str, operation: str) -> int:
    """value as a non-negative Python int, or InvalidArgument naming what."""
    try:
        v = operator.index(value)
    except TypeError:
        raise errors.InvalidArgument(
            22, f"{what} must be an integer, got {type(value).__name__} {value!r}", operation) from None
    if v < 0:
        raise errors.InvalidArgument(22, f"{what} must be >= 0, got {v}", operation)
    return v


def view_shape(dtype: Any, shape: Optional[Shape], room: int, owner: str, where: str,
               operation: str) -> Tuple["numpy.dtype[Any]", Tuple[int, ...], int]:
    """(dtype, dims, element count) of a numpy view of ``room`` bytes of ``owner`` ("the buffer"),
    ``where`` in it ("from offset 8", or ""): the shape given, or one dimension of as many
    elements as fit exactly."""
    import numpy as np

    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise errors.InvalidArgument(22, f"not a numpy dtype: {e}", operation) from None
    if dt.itemsize == 0:
        raise errors.InvalidArgument(22, f"dtype {dt} has no size", operation)
    if shape is None:
        if room % dt.itemsize:
            raise errors.InvalidArgument(
                22, f"{room} bytes{' ' + where if where else ''} are not a whole number of {dt} elements "
                f"({dt.itemsize} bytes each); give shape=", operation)
        dims: Tuple[int, ...] = (room // dt.itemsize,)
    else:
        dims = (shape,) if not isinstance(shape, (tuple, list)) else tuple(shape)
        dims = tuple(_index(d, "shape", operation) for d in dims)
    count = 1
    for d in dims:
        count *= d
    if count * dt.itemsize > room:
        raise errors.InvalidArgument(
            22, f"shape {dims} of {dt} needs {count * dt.itemsize} bytes, {owner} has {room}"
            f"{' ' + where if where else ''}", operation)
    return dt, dims, count


class Buffer:
    """A GPU buffer of this session (from :meth:`Session.alloc`).

    The buffer lives until :meth:`free`, the end of a ``with`` block on it, or
    :meth:`Session.close`; it is not freed when the object is garbage-collected.

    Its memory is the dma-buf the daemon sent: :meth:`numpy` and
    :meth:`memoryview` are views of one shared mapping of it, without copies.
    The GPU's jobs write the same memory: wait for a job's fence before
    reading what it wrote.
    """

    def __init__(self, session: "Session", ptr: int, placement: str):
        self._session = session
        self._ptr: Optional[int] = ptr
        self._map: Optional[mmap.mmap] = None
        self.placement = placement
        self.size: int = lib().kfdb_buffer_get_size(ptr)
        """The buffer's size in bytes: what was asked for, rounded up to 4 KiB by the daemon."""
        self.handle: int = lib().kfdb_buffer_get_handle(ptr)
        """The buffer's handle in the session (as the daemon's logs name it)."""

    def __repr__(self) -> str:
        state = "freed" if self._ptr is None else f"{self.size} bytes"
        return f"<kfdbroker.Buffer {self.handle} {self.placement} {state}>"

    def __enter__(self) -> "Buffer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()

    @property
    def freed(self) -> bool:
        """True once the buffer was freed (or its session closed)."""
        return self._ptr is None or self._session.closed

    def _checked(self, operation: str) -> int:
        """The C pointer, or Closed naming why there is none."""
        if self._session.closed:
            raise errors.Closed(9, "the session is closed", operation)
        if self._ptr is None:
            raise errors.Closed(9, f"buffer {self.handle} was freed", operation)
        return self._ptr

    @property
    def gpu(self) -> int:
        """The index of the GPU the buffer is on: the session's, unless :meth:`Session.alloc` named
        another (0 with a library before KFDBROKER_0.14, which cannot)."""
        ptr = self._checked("Buffer.gpu")
        if _lib.require("kfdb_buffer_get_gpu"):
            return 0
        return int(lib().kfdb_buffer_get_gpu(ptr))

    @property
    def fd(self) -> int:
        """The buffer's dma-buf file descriptor, owned by the buffer (``os.dup`` it to keep it)."""
        ptr = self._checked("Buffer.fd")
        return int(lib().kfdb_buffer_get_fd(ptr))

    def _mapping(self, operation: str) -> mmap.mmap:
        # Python's own mapping of the dma-buf (not kfdb_buffer_map()'s): numpy arrays and
        # memoryviews hold a reference to it, so they stay valid after free() or close().
        with self._session._lock:
            self._checked(operation)
            if self._map is None:
                try:
                    self._map = mmap.mmap(self.fd, self.size, flags=mmap.MAP_SHARED,
                                          prot=mmap.PROT_READ | mmap.PROT_WRITE)
                except OSError as e:
                    raise errors.from_errno(e.errno or 5, f"cannot map the dma-buf: {e.strerror}",
                                            operation) from None
            return self._map

    def memoryview(self) -> memoryview:
        """A writable memoryview of the whole buffer (bytes, no copy)."""
        return memoryview(self._mapping("Buffer.memoryview()"))

    def numpy(self, dtype: Any = "uint8", shape: Optional[Shape] = None,
              offset: int = 0) -> "numpy.ndarray[Any, Any]":
        """A numpy array viewing the buffer's memory, without a copy.

        Args:
            dtype: the element type (anything ``numpy.dtype()`` takes).
            shape: the array's shape; default: one dimension holding as many
                elements as fit from ``offset`` to the end.
            offset: byte offset of the first element.

        Writes through the array are writes to the buffer, which the GPU's
        next jobs see; after a job, :meth:`Session.wait` for its fence before
        reading. Arrays made before :meth:`free` keep the memory mapped until
        they are garbage-collected, but it is no longer the GPU buffer.

        Raises:
            InvalidArgument: the shape does not fit, or the buffer does not
                hold a whole number of elements and no shape was given.
            Closed: the buffer was freed or the session closed.
        """
        import numpy as np

        operation = f"Buffer.numpy({dtype!r}, shape={shape!r}, offset={offset!r})"
        offset = _index(offset, "offset", operation)
        if offset > self.size:
            raise errors.InvalidArgument(22, f"offset {offset} is past the buffer's {self.size} bytes", operation)
        dt, dims, count = view_shape(dtype, shape, self.size - offset, "the buffer", f"from offset {offset}",
                                     operation)
        return np.frombuffer(self._mapping(operation), dtype=dt, count=count, offset=offset).reshape(dims)

    def at(self, offset: int) -> "BufferRef":
        """This buffer from a byte offset on, as a kernel argument (the kernel gets its address + offset)."""
        operation = f"Buffer.at({offset!r})"
        offset = _index(offset, "offset", operation)
        self._checked(operation)
        return BufferRef(self, offset)

    def free(self) -> None:
        """Free the buffer in the daemon and here. A second call does nothing.

        Raises:
            Busy: jobs in flight still use it (it is released here anyway).
        """
        if self._ptr is None or self._session.closed:
            self._ptr = None
            return
        ptr, self._ptr = self._ptr, None
        self._unmap()
        with self._session._lock:
            r = lib().kfdb_buffer_free(ptr)
            if r < 0:
                raise self._session._error(r, f"Buffer({self.handle}).free()")

    def _unmap(self) -> None:
        # Arrays still viewing the mapping keep it (and the dma-buf) alive.
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:
                pass
            self._map = None

    def _released(self) -> None:
        """The session closed: libkfdbroker released the buffer."""
        self._ptr = None
        self._unmap()


class BufferRef:
    """A buffer from a byte offset on, for a kernel argument (from :meth:`Buffer.at`)."""

    def __init__(self, buffer: Buffer, offset: int):
        self.buffer = buffer
        self.offset = offset

    def __repr__(self) -> str:
        return f"<kfdbroker.BufferRef {self.buffer!r} + {self.offset}>"
