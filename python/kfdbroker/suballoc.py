# SPDX-License-Identifier: MIT
"""Many small buffers inside a few daemon buffers: libkfdbroker's
sub-allocator (kfdb_suballocator_new(), kfdb_slice_alloc()). A slice costs no
round trip to the daemon; the daemon sees, charges and maps the blocks it
lives in."""
from __future__ import annotations

import ctypes
import mmap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Tuple

from . import _lib, errors
from ._lib import lib
from .buffer import Shape, _index, view_shape

if TYPE_CHECKING:  # pragma: no cover
    import numpy

    from .session import Fence, Session

__all__ = ["SubAllocator", "Slice", "SubAllocatorStats"]


@dataclass(frozen=True)
class SubAllocatorStats:
    """What a :class:`SubAllocator` holds now."""

    blocks: int
    """Daemon buffers held (a slice larger than the block size has one of its own)."""
    block_bytes: int
    """Their bytes: what the daemon charges the session for."""
    slices: int
    """Live slices, frees waiting for a fence included."""
    slice_bytes: int
    """Bytes the slices reserve."""
    pending_frees: int
    """Slices freed after a fence that has not completed yet."""


class Slice:
    """A range of a block of a :class:`SubAllocator` (from :meth:`SubAllocator.alloc`).

    Use it where a buffer goes in :meth:`Batch.fill` and :meth:`Batch.copy` (offsets are then
    inside the slice, and a job may not reach past its end), and view its memory with
    :meth:`numpy` or :meth:`memoryview`. It lives until :meth:`SubAllocator.free` or the
    allocator's :meth:`SubAllocator.close`.
    """

    def __init__(self, allocator: "SubAllocator", c: _lib.kfdb_slice):
        self._allocator = allocator
        self._c: Optional[_lib.kfdb_slice] = c
        self.size: int = c.size
        """Bytes reserved: what was asked for, rounded up."""
        self.offset: int = c.offset
        """Where the slice starts in its block."""
        self.block_handle: int = lib().kfdb_buffer_get_handle(c.buffer)
        """The handle of its block in the session (as the daemon's logs name it)."""

    def __repr__(self) -> str:
        state = "freed" if self._c is None else f"{self.size} bytes at {self.offset}"
        return f"<kfdbroker.Slice of block {self.block_handle}, {state}>"

    @property
    def freed(self) -> bool:
        return self._c is None or self._allocator.closed

    def _checked(self, operation: str) -> _lib.kfdb_slice:
        self._allocator._checked(operation)
        if self._c is None:
            raise errors.Closed(9, f"the slice at {self.offset} of block {self.block_handle} was freed", operation)
        return self._c

    def _job_range(self, offset: int, size: Optional[int], what: str, operation: str) -> Tuple[int, int, int]:
        """(block pointer, offset in the block, size) of a job's range inside the slice."""
        c = self._checked(operation)
        if offset >= self.size:
            raise errors.InvalidArgument(22, f"{what} offset {offset} is past the slice's {self.size} bytes",
                                         operation)
        if size is None:
            size = self.size - offset
        size = _index(size, "size", operation)
        if size > self.size - offset:
            raise errors.InvalidArgument(
                22, f"{what} range offset {offset} + size {size} is outside the slice's {self.size} bytes",
                operation)
        return int(c.buffer), self.offset + offset, size

    def _mapping(self, operation: str) -> mmap.mmap:
        # A mapping of the block's dma-buf of this view's own, at the page the
        # slice starts in: arrays keep it (and the memory) after the slice or
        # its block is given back.
        c = self._checked(operation)
        fd = lib().kfdb_buffer_get_fd(c.buffer)
        start = self.offset - self.offset % mmap.ALLOCATIONGRANULARITY
        try:
            return mmap.mmap(fd, self.offset - start + self.size, flags=mmap.MAP_SHARED,
                             prot=mmap.PROT_READ | mmap.PROT_WRITE, offset=start)
        except OSError as e:
            raise errors.from_errno(e.errno or 5, f"cannot map the block's dma-buf: {e.strerror}",
                                    operation) from None

    def memoryview(self) -> memoryview:
        """A writable memoryview of the slice's bytes (no copy)."""
        m = self._mapping("Slice.memoryview()")
        skip = self.offset % mmap.ALLOCATIONGRANULARITY
        return memoryview(m)[skip:skip + self.size]

    def numpy(self, dtype: Any = "uint8", shape: Optional[Shape] = None) -> "numpy.ndarray[Any, Any]":
        """A numpy array viewing the slice's memory, without a copy (as :meth:`Buffer.numpy`).

        Raises:
            InvalidArgument: the shape does not fit in the slice, or the slice does not hold a
                whole number of elements and no shape was given.
            Closed: the slice was freed, or its allocator or session closed.
        """
        import numpy as np

        operation = f"Slice.numpy({dtype!r}, shape={shape!r})"
        dt, dims, count = view_shape(dtype, shape, self.size, "the slice", "", operation)
        m = self._mapping(operation)
        return np.frombuffer(m, dtype=dt, count=count,
                             offset=self.offset % mmap.ALLOCATIONGRANULARITY).reshape(dims)

    def _released(self) -> None:
        self._c = None


class SubAllocator:
    """Slices of a few daemon buffers (from :meth:`Session.suballocator`).

    A slice costs no round trip: the allocator asks the daemon for a block (4 MiB unless said
    otherwise) when none has room, and gives empty blocks back, keeping one. The daemon
    charges the session for the blocks. Used as a context manager, the allocator is closed at
    the end of the block.
    """

    def __init__(self, session: "Session", ptr: int, placement: str, block_size: int):
        self._session = session
        self._ptr: Optional[int] = ptr
        self._slices: "set[Slice]" = set()
        self.placement = placement
        self.block_size = block_size or 4 << 20
        """The size of its blocks."""

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self._slices)} slices"
        return f"<kfdbroker.SubAllocator {self.placement} {self.block_size} bytes a block, {state}>"

    def __enter__(self) -> "SubAllocator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._ptr is None or self._session.closed

    def _checked(self, operation: str) -> int:
        if self._session.closed:
            raise errors.Closed(9, "the session is closed", operation)
        if self._ptr is None:
            raise errors.Closed(9, "the sub-allocator was closed", operation)
        return self._ptr

    def alloc(self, nbytes: int, alignment: int = 0) -> Slice:
        """A slice of at least ``nbytes``, aligned to ``alignment`` bytes (0: 256; else a power of two
        no larger than the block). A slice is a power of two of 256-byte granules, aligned to its own
        size in its block. A reused range holds what this process last wrote there; a new block
        is zeroed.

        Raises:
            InvalidArgument: ``nbytes`` is 0, ``alignment`` is not a power of two.
            QuotaExceeded: a new block would put the session over a limit (the message names it).
        """
        operation = f"SubAllocator.alloc({nbytes!r}, alignment={alignment!r})"
        nbytes = _index(nbytes, "nbytes", operation)
        alignment = _index(alignment, "alignment", operation)
        c = _lib.kfdb_slice()
        with self._session._lock:
            r = lib().kfdb_slice_alloc(self._checked(operation), nbytes, alignment, ctypes.byref(c))
            if r < 0:
                raise self._session._error(r, operation)
            s = Slice(self, c)
        self._slices.add(s)
        return s

    def free(self, slice: Slice, after: Optional["Fence"] = None) -> None:
        """Give ``slice`` back: at once, or with ``after`` (a :class:`Fence`) only once that job has
        finished, so that a job still using the slice does not race its next owner.

        Raises:
            InvalidArgument: not a slice of this allocator, freed already, or a fence of another
                session.
        """
        from .session import Fence

        operation = f"SubAllocator.free({slice!r}, after={after!r})"
        if not isinstance(slice, Slice) or slice._allocator is not self:
            raise errors.InvalidArgument(22, f"{slice!r} is not a slice of this sub-allocator", operation)
        if after is not None and (not isinstance(after, Fence) or after.session is not self._session):
            raise errors.InvalidArgument(22, f"after must be a Fence of this session, got {after!r}", operation)
        with self._session._lock:
            c = slice._checked(operation)
            r = lib().kfdb_slice_free(self._checked(operation), ctypes.byref(c), int(after) if after else 0)
            if r < 0:
                raise self._session._error(r, operation)
        slice._released()
        self._slices.discard(slice)

    def stats(self) -> SubAllocatorStats:
        """What the allocator holds now (frees whose fence has completed are done first)."""
        st = _lib.kfdb_suballocator_stats()
        with self._session._lock:
            r = lib().kfdb_suballocator_get_stats(self._checked("SubAllocator.stats()"), ctypes.byref(st))
            if r < 0:
                raise self._session._error(r, "SubAllocator.stats()")
        return SubAllocatorStats(blocks=st.blocks, block_bytes=st.block_bytes, slices=st.slices,
                                 slice_bytes=st.slice_bytes, pending_frees=st.pending_frees)

    def close(self) -> None:
        """Give every block back to the daemon; the slices go with them. A second call does nothing.
        Jobs still using a slice keep their blocks alive in the daemon until they finish."""
        if self._ptr is None:
            return
        ptr, self._ptr = self._ptr, None
        for s in list(self._slices):
            s._released()
        self._slices.clear()
        if not self._session.closed:
            with self._session._lock:
                lib().kfdb_suballocator_free(ptr)

    def _released(self) -> None:
        """The session closed: libkfdbroker freed the allocator with it."""
        self._ptr = None
        for s in list(self._slices):
            s._released()
        self._slices.clear()
