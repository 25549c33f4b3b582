# SPDX-License-Identifier: MIT
"""A session with kfdbrokerd: one connection through libkfdbroker, and the
objects made through it (buffers, events, code objects, batches of jobs)."""
from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
import weakref
from dataclasses import dataclass, fields
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Type, TypeVar, Union

from . import _lib, errors
from ._lib import lib
from .buffer import Buffer, _index
from .compute import CodeObject, Dims, dims, pack_args
from .suballoc import Slice, SubAllocator

__all__ = ["Session", "Fence", "Event", "Batch", "Device", "Limits", "Usage", "Status", "default_socket_path"]

T = TypeVar("T")
PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

_PLACEMENTS = {"gtt": _lib.KFDB_PLACEMENT_GTT, "vram": _lib.KFDB_PLACEMENT_VRAM}
_ENGINES = {"auto": _lib.KFDB_ENGINE_AUTO, "sdma": _lib.KFDB_ENGINE_SDMA, "compute": _lib.KFDB_ENGINE_COMPUTE}


def default_socket_path() -> str:
    """The socket a Session connects to without ``socket=``: ``$KFDBROKER_SOCKET`` if set, else the
    library's compiled-in default (``/run/kfdbroker/kfdbroker.sock``)."""
    env = os.environ.get("KFDBROKER_SOCKET")
    return env if env else str(lib().kfdb_default_socket_path().decode())


def _timeout_ms(timeout: Optional[float], operation: str) -> int:
    """Seconds (None: forever) as libkfdbroker's milliseconds."""
    if timeout is None:
        return _lib.KFDB_TIMEOUT_INFINITE
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout != timeout:
        raise errors.InvalidArgument(22, f"timeout must be seconds (a number) or None, got {timeout!r}", operation)
    if timeout < 0:
        raise errors.InvalidArgument(22, f"timeout must be >= 0 seconds or None, got {timeout}", operation)
    return min(int(round(timeout * 1000)), 2**31 - 1)


def _pointer(p: ctypes.c_void_p) -> int:
    """The object a libkfdbroker call returned through p (it returns 0 only with one)."""
    if not p.value:
        raise errors.ProtocolError(71, "libkfdbroker returned success without an object")
    return p.value


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _from_struct(cls: Type[T], s: ctypes.Structure, **extra: Any) -> T:
    values = {}
    for f in fields(cls):
        if f.name in extra:
            continue
        v = getattr(s, f.name)
        values[f.name] = _text(v) if isinstance(v, bytes) else v
    return cls(**values, **extra)


@dataclass(frozen=True)
class Limits:
    """The session's limits, as the daemon announced them (from the policy)."""

    max_buffer_size: int
    max_buffer_bytes: int
    max_buffers: int
    max_events: int
    max_jobs_in_flight: int
    max_jobs_per_submit: int
    max_message_size: int
    max_wait_events: int


@dataclass(frozen=True)
class Device:
    """The daemon's GPU."""

    backend: str
    """``"kfd"`` (a real GPU) or ``"sim"`` (the simulated one)."""
    gfx_name: str
    name: str
    gpu_id: int
    vendor_id: int
    device_id: int
    cu_count: int
    vram_size: int
    kfd_major: int
    kfd_minor: int
    sdma_queues: int
    compute_queues: int
    """Hardware compute queues the device offers a GPU context; 0 if it runs no dispatches (then
    dispatch raises NotSupported)."""


@dataclass(frozen=True)
class Gpu:
    """One GPU the daemon serves (``Session.gpus()``)."""

    index: int
    """What ``Session(gpu=...)`` and ``$KFDBROKER_GPU`` take: its place in ``kfdbrokerctl status``."""
    gfx_name: str
    name: str
    gpu_id: int
    node: str
    """Which KFD topology node, e.g. ``"node 2 (gfx1030, 0000:03:00.0, renderD129, discrete, ...)"``."""
    node_reason: str
    vram_size: int
    cu_count: int
    sessions: int
    jobs_completed: int
    jobs_failed: int
    jobs_in_flight: int
    gpu_buffers: int


@dataclass(frozen=True)
class Usage:
    """This session's use of the daemon."""

    buffers: int
    buffer_bytes: int
    events: int
    jobs_submitted: int
    jobs_completed: int
    jobs_failed: int
    jobs_in_flight: int
    bytes_copied: int
    bytes_filled: int
    limits: Limits
    context_bytes: int
    """Of ``buffer_bytes``: the own memory of the GPU context this session pays for (its queue's
    ring, EOP and CWSR areas, kernel arguments, scratch), charged under the same limits as buffers;
    0 before its first dispatch and after an idle context was given up."""


@dataclass(frozen=True)
class Status:
    """The daemon's overall state (all sessions)."""

    daemon_version: str
    backend: str
    gfx_name: str
    sessions: int
    jobs_completed: int
    jobs_failed: int
    uptime_ns: int
    buffer_bytes: int
    gpu_buffers: int
    jobs_in_flight: int
    events: int


class Fence:
    """The completion point of one job (from fill, copy, dispatch or a batch's submit)."""

    def __init__(self, session: "Session", value: int):
        self.session = session
        self.value = value
        """The job's fence value: fences of one session increase with each job."""

    def __repr__(self) -> str:
        return f"<kfdbroker.Fence {self.value}{' done' if not self.session.closed and self.done else ''}>"

    def __int__(self) -> int:
        return self.value

    @property
    def done(self) -> bool:
        """Whether the job finished, successfully or not (reads the session page: no round trip)."""
        with self.session._lock:
            s = self.session._checked("Fence.done")
            return bool(lib().kfdb_fence_is_done(s, self.value) == 1)

    def wait(self, timeout: Optional[float] = None) -> None:
        """Same as ``session.wait(fence, timeout)``."""
        self.session.wait(self, timeout)


class Event:
    """An event with KFD semantics (from :meth:`Session.event`), signalled from the CPU
    with :meth:`set` or by a job (:meth:`Batch.signal`), waited for with :meth:`wait` or by a
    job (:meth:`Batch.wait_for`)."""

    def __init__(self, session: "Session", ptr: int, auto_reset: bool):
        self._session = session
        self._ptr: Optional[int] = ptr
        self.auto_reset = auto_reset
        """Whether a completed wait resets the event."""
        self.handle: int = lib().kfdb_event_get_handle(ptr)

    def __repr__(self) -> str:
        state = "destroyed" if self._ptr is None else f"age {self.age}"
        return f"<kfdbroker.Event {self.handle} {state}>"

    def __enter__(self) -> "Event":
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()

    def _checked(self, operation: str) -> int:
        if self._session.closed:
            raise errors.Closed(9, "the session is closed", operation)
        if self._ptr is None:
            raise errors.Closed(9, f"event {self.handle} was destroyed", operation)
        return self._ptr

    def _call(self, fn: str, operation: str) -> None:
        with self._session._lock:
            r = getattr(lib(), fn)(self._checked(operation))
            if r < 0:
                raise self._session._error(r, operation)

    def set(self) -> None:
        """Signal the event."""
        self._call("kfdb_event_set", f"Event({self.handle}).set()")

    def reset(self) -> None:
        """Reset the event to unsignaled."""
        self._call("kfdb_event_reset", f"Event({self.handle}).reset()")

    def is_set(self) -> bool:
        """Whether the event is signaled now (session page, no round trip)."""
        with self._session._lock:
            return bool(lib().kfdb_event_is_signaled(self._checked("Event.is_set()")))

    @property
    def age(self) -> int:
        """How many times the event was signaled, plus one (session page, no round trip)."""
        with self._session._lock:
            return int(lib().kfdb_event_get_age(self._checked("Event.age")))

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait in the daemon until the event is signaled: True, or False after ``timeout`` seconds
        (None waits forever, 0 polls). Returns at once if it is signaled already; an auto-reset
        event is reset by the wait.

        Raises:
            Closed: the event was destroyed (also while the wait was on).
        """
        operation = f"Event({self.handle}).wait(timeout={timeout!r})"
        ms = _timeout_ms(timeout, operation)
        with self._session._lock:
            entry = _lib.kfdb_wait_entry(self._checked(operation), 0)
            result = ctypes.c_int()
            s = self._session._checked(operation)
            r = lib().kfdb_wait_events(s, ctypes.byref(entry), 1, False, ms, ctypes.byref(result))
            if r < 0:
                raise self._session._error(r, operation)
        if result.value == _lib.KFDB_WAIT_FAIL:
            raise errors.Closed(9, f"event {self.handle} was destroyed before the wait completed", operation)
        return result.value == _lib.KFDB_WAIT_COMPLETE

    def destroy(self) -> None:
        """Destroy the event in the daemon and here. A second call does nothing."""
        if self._ptr is None or self._session.closed:
            self._ptr = None
            return
        ptr, self._ptr = self._ptr, None
        with self._session._lock:
            r = lib().kfdb_event_destroy(ptr)
            if r < 0:
                raise self._session._error(r, f"Event({self.handle}).destroy()")

    def _released(self) -> None:
        self._ptr = None


class Batch:
    """Jobs sent to the daemon in one message (from :meth:`Session.batch`).

    Jobs of one engine run in order: copies and fills on the DMA engine,
    dispatches on the compute engine. Across engines, order them with an event:
    ``signal(ev)`` after the jobs to wait for, ``wait_for(ev)`` before the jobs
    that must wait; the GPU resolves the wait, without a round trip through
    this process. Used as a context manager, the batch is submitted at the end
    of the block (unless it raised) and :attr:`fences` holds the result.
    """

    def __init__(self, session: "Session", gpu: Optional[int] = None):
        self._session = session
        ptr = ctypes.c_void_p()
        with session._lock:
            r = lib().kfdb_batch_new(session._checked("batch()"), ctypes.byref(ptr))
            if r < 0:
                raise session._error(r, "batch()")
        self._ptr: Optional[int] = ptr.value
        session._track(self)
        if gpu is not None:
            self.gpu = gpu
        self.fences: List[Fence] = []
        """The fences of the last submit, one per job."""

    def __repr__(self) -> str:
        return f"<kfdbroker.Batch {len(self)} jobs>"

    def __len__(self) -> int:
        if self._ptr is None or self._session.closed:
            return 0
        return int(lib().kfdb_batch_get_n_jobs(self._ptr))

    def __enter__(self) -> "Batch":
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        if exc_type is None and len(self) > 0:
            self.submit()

    def __del__(self) -> None:
        try:
            if self._ptr is not None and not self._session.closed:
                with self._session._lock:
                    lib().kfdb_batch_free(self._ptr)
        except Exception:
            pass
        self._ptr = None

    def _checked(self, operation: str) -> int:
        self._session._checked(operation)
        if self._ptr is None:
            raise errors.Closed(9, "the batch was released", operation)
        return self._ptr

    @property
    def gpu(self) -> Optional[int]:
        """The GPU the jobs added from now on run on (its index), or None: the session's GPU.
        A fill's or a dispatch's buffers must be on the job's GPU; a copy takes buffers of any
        GPU (the daemon imports the other GPU's, which needs KFD 1.15). Jobs on two GPUs are
        ordered only by events (``signal``/``wait_for``) or by waiting for a fence. A batch
        naming a GPU goes as one Submit request, never through the submit ring.

        Raises (on setting):
            NotSupported: the loaded libkfdbroker is older than KFDBROKER_0.14.
        """
        if _lib.require("kfdb_batch_get_gpu"):
            return None
        with self._session._lock:
            g = int(lib().kfdb_batch_get_gpu(self._checked("Batch.gpu")))
        return None if g == _lib.GPU_SESSION else g

    @gpu.setter
    def gpu(self, gpu: Optional[int]) -> None:
        operation = f"Batch.gpu = {gpu!r}"
        why = _lib.require("kfdb_batch_set_gpu")
        if why:
            raise errors.NotSupported(95, why, operation)
        index = _lib.GPU_SESSION if gpu is None else _index(gpu, "gpu", operation)
        if gpu is not None and index >= _lib.GPU_SESSION:
            raise errors.InvalidArgument(22, f"no GPU index {gpu!r}", operation)
        self._add(operation, "kfdb_batch_set_gpu", index)

    def _add(self, operation: str, fn: str, *args: Any) -> None:
        with self._session._lock:
            r = getattr(lib(), fn)(self._checked(operation), *args)
            if r < 0:
                raise self._session._error(r, operation)

    def fill(self, buf: Union[Buffer, Slice], pattern32: Any, offset: int = 0, size: Optional[int] = None) -> None:
        """Add a fill of ``size`` bytes (default: to the end) at ``offset`` with a 32-bit pattern: an int
        (0..2**32-1, or negative as int32) or any 4-byte numpy scalar (``numpy.float32(1.0)``).
        Offset and size must be multiples of 4. ``buf`` may be a :class:`Slice`: offsets are then
        inside the slice, and the fill may not reach past its end."""
        operation = f"fill({buf!r}, {pattern32!r}, offset={offset!r}, size={size!r})"
        pattern = _pattern32(pattern32, operation)
        offset = _index(offset, "offset", operation)
        if isinstance(buf, Slice):
            _slice_of(buf, self._session, "fill destination", operation)
            ptr, offset, size = buf._job_range(offset, size, "fill", operation)
            self._add(operation, "kfdb_batch_fill", ptr, offset, size, pattern)
            return
        ptr = _buffer_ptr(buf, "fill destination", self._session, operation)
        if size is None:
            if offset >= buf.size:
                raise errors.InvalidArgument(
                    22, f"offset {offset} leaves nothing to fill in the buffer's {buf.size} bytes", operation)
            size = buf.size - offset
        size = _index(size, "size", operation)
        self._add(operation, "kfdb_batch_fill", ptr, offset, size, pattern)

    def copy(self, dst: Union[Buffer, Slice], src: Union[Buffer, Slice], size: Optional[int] = None,
             dst_offset: int = 0, src_offset: int = 0) -> None:
        """Add a copy of ``size`` bytes (default: the rest of ``src`` from ``src_offset``) from ``src``
        at ``src_offset`` to ``dst`` at ``dst_offset``, on the GPU's DMA engine. Offsets and size
        must be multiples of 4 and inside the buffers. Either may be a :class:`Slice`: its offset
        is then inside the slice, and the copy may not reach past its end."""
        operation = f"copy({dst!r}, {src!r}, size={size!r}, dst_offset={dst_offset!r}, src_offset={src_offset!r})"
        dst_offset = _index(dst_offset, "dst_offset", operation)
        src_offset = _index(src_offset, "src_offset", operation)
        if isinstance(dst, Slice) or isinstance(src, Slice):
            self._copy_slices(operation, dst, src, size, dst_offset, src_offset)
            return
        dptr = _buffer_ptr(dst, "copy destination", self._session, operation)
        sptr = _buffer_ptr(src, "copy source", self._session, operation)
        if size is None:
            if src_offset >= src.size:
                raise errors.InvalidArgument(
                    22, f"src_offset {src_offset} leaves nothing to copy in the source's {src.size} bytes", operation)
            size = src.size - src_offset
        size = _index(size, "size", operation)
        self._add(operation, "kfdb_batch_copy", dptr, dst_offset, sptr, src_offset, size)

    def _copy_slices(self, operation: str, dst: Any, src: Any, size: Optional[int], dst_offset: int,
                     src_offset: int) -> None:
        # The range of each end as (pointer, offset in its buffer or block, bytes from there).
        def end(obj: Any, offset: int, what: str) -> Tuple[int, int, int]:
            if isinstance(obj, Slice):
                _slice_of(obj, self._session, what, operation)
                return obj._job_range(offset, None, what, operation)
            ptr = _buffer_ptr(obj, what, self._session, operation)
            if offset >= obj.size:
                raise errors.InvalidArgument(22, f"{what} offset {offset} is past its {obj.size} bytes", operation)
            return ptr, offset, obj.size - offset

        sptr, soff, sroom = end(src, src_offset, "copy source")
        dptr, doff, droom = end(dst, dst_offset, "copy destination")
        if size is None:
            size = sroom
        size = _index(size, "size", operation)
        for what, room, obj in (("source", sroom, src), ("destination", droom, dst)):
            if isinstance(obj, Slice) and size > room:
                raise errors.InvalidArgument(
                    22, f"copy {what}: {size} bytes from its offset reach past the slice's {obj.size} bytes",
                    operation)
        self._add(operation, "kfdb_batch_copy", dptr, doff, sptr, soff, size)

    def dispatch(self, code_object: CodeObject, name: str, grid: Dims, block: Dims, *args: Any) -> None:
        """Add a dispatch of kernel ``name`` of ``code_object`` over ``grid`` work-items (not workgroups)
        in workgroups of ``block`` work-items: ints or tuples of 1 to 3 ints, of as many dimensions.

        ``args`` are the kernel's explicit arguments in order (see ``code_object.kernels[name].args``):
        a :class:`Buffer` (or ``buf.at(offset)``) for a global pointer; for a value, a numpy
        scalar of exactly the argument's size, a Python int (checked to fit the size), a Python
        float (float32 for 4 bytes, float64 for 8) or bytes; :class:`Local` for a ``local`` pointer.
        """
        operation = f"dispatch({code_object!r}, {name!r}, {grid!r}, {block!r}, ...)"
        if not isinstance(code_object, CodeObject):
            raise errors.InvalidArgument(22, f"not a CodeObject: {code_object!r}", operation)
        if code_object._session is not self._session:
            raise errors.InvalidArgument(22, f"{code_object!r} belongs to another session", operation)
        co = code_object._checked(operation)
        kernel = code_object.kernel(name)
        g, b = dims(grid, "grid", operation), dims(block, "block", operation)
        if len(g) != len(b):
            raise errors.InvalidArgument(
                22, f"grid has {len(g)} dimensions, block {len(b)}: give both the same number", operation)
        arr, keep = pack_args(kernel, args, self._session, operation)
        n = len(g)
        self._add(operation, "kfdb_batch_dispatch", co, name.encode(), n, (ctypes.c_uint32 * n)(*g),
                  (ctypes.c_uint32 * n)(*b), arr, len(args))
        del keep

    def signal(self, event: Event, engine: str = "auto") -> None:
        """Add a job that signals ``event`` when the jobs before it on ``engine`` completed.
        ``engine``: ``"auto"`` (the engine of the job before it), ``"sdma"`` or ``"compute"``."""
        operation = f"Batch.signal({event!r}, engine={engine!r})"
        self._add(operation, "kfdb_batch_signal_event_on", _event_ptr(event, self._session, operation),
                  _engine(engine, operation))

    def wait_for(self, event: Event, engine: str = "auto") -> None:
        """Add a job that holds the jobs after it on ``engine`` until ``event`` is signaled.
        ``engine``: ``"auto"`` (the engine of the job after it), ``"sdma"`` or ``"compute"``."""
        operation = f"Batch.wait_for({event!r}, engine={engine!r})"
        self._add(operation, "kfdb_batch_wait_event_on", _event_ptr(event, self._session, operation),
                  _engine(engine, operation))

    def submit(self) -> List[Fence]:
        """Send the jobs; returns one fence per job (also in :attr:`fences`). The batch is then empty."""
        operation = "Batch.submit()"
        with self._session._lock:
            ptr = self._checked(operation)
            n = lib().kfdb_batch_get_n_jobs(ptr)
            out = (ctypes.c_uint64 * max(n, 1))()
            r = lib().kfdb_batch_submit(ptr, out, None)
            if r < 0:
                lib().kfdb_batch_reset(ptr)
                raise self._session._error(r, operation)
        self.fences = [Fence(self._session, out[i]) for i in range(n)]
        return self.fences

    def _released(self) -> None:
        self._ptr = None


def _pattern32(value: Any, operation: str) -> int:
    if hasattr(value, "dtype") and hasattr(value, "tobytes") and getattr(value, "shape", ()) == ():
        if value.dtype.itemsize != 4:
            raise errors.InvalidArgument(
                22, f"pattern32 must be 4 bytes, got numpy.{value.dtype.name} ({value.dtype.itemsize} bytes)",
                operation)
        return int.from_bytes(value.tobytes(), "little")
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.InvalidArgument(
            22, f"pattern32 must be an int or a 4-byte numpy scalar (numpy.float32(1.0)), got "
            f"{type(value).__name__} {value!r}", operation)
    if not -2**31 <= value < 2**32:
        raise errors.InvalidArgument(22, f"pattern32 must fit 32 bits (-2**31..2**32-1), got {value}", operation)
    return value & 0xFFFFFFFF


def _buffer_ptr(buf: Any, what: str, session: "Session", operation: str) -> int:
    if not isinstance(buf, Buffer):
        raise errors.InvalidArgument(22, f"{what} is not a Buffer: {buf!r}", operation)
    if buf._session is not session:
        raise errors.InvalidArgument(22, f"{what} {buf!r} belongs to another session", operation)
    return buf._checked(operation)


def _slice_of(slice: Slice, session: "Session", what: str, operation: str) -> None:
    if slice._allocator._session is not session:
        raise errors.InvalidArgument(22, f"{what} {slice!r} belongs to another session", operation)


def _event_ptr(event: Any, session: "Session", operation: str) -> int:
    if not isinstance(event, Event):
        raise errors.InvalidArgument(22, f"not an Event: {event!r}", operation)
    if event._session is not session:
        raise errors.InvalidArgument(22, f"{event!r} belongs to another session", operation)
    return event._checked(operation)


def _engine(engine: str, operation: str) -> int:
    try:
        return _ENGINES[engine]
    except (KeyError, TypeError):
        raise errors.InvalidArgument(22, f"engine must be one of {', '.join(_ENGINES)}, got {engine!r}",
                                     operation) from None


def _default_client_name() -> str:
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    name = "".join(c for c in name if c.isprintable())[:64]
    return name if name and name != "-c" else "python"


class Session:
    """A connection to kfdbrokerd.

    Args:
        socket: the daemon's socket; default ``$KFDBROKER_SOCKET``, else
            ``/run/kfdbroker/kfdbroker.sock`` (see :func:`default_socket_path`).
        client_name: the name the daemon shows in its logs and accounting
            (at most 64 printable bytes); default: the script's name.

    Use it as a context manager, or call :meth:`close`. Closing releases every
    buffer, event and code object of the session (the daemon frees them). A
    session may be shared between threads, but its calls take turns (a wait
    holds the others up): use a session per thread for work in parallel.

    Raises:
        NotFound: no socket at that path (is kfdbrokerd running?).
        ConnectionRefused: nothing listens there.
        PermissionDenied: this user may not use the socket.
        LibraryNotFound: libkfdbroker could not be loaded (an ImportError).
    """

    def __init__(self, socket: Optional[PathLike] = None, client_name: Optional[str] = None,
                 gpu: Optional[int] = None):
        self._lock = threading.RLock()
        self._ptr: Optional[int] = None
        self._objects: "weakref.WeakSet[Any]" = weakref.WeakSet()
        path = os.fsdecode(socket) if socket is not None else default_socket_path()
        self.socket: str = path
        """The socket path this session connected to."""
        name = client_name if client_name is not None else _default_client_name()
        operation = f"Session({path!r})"
        ptr = ctypes.c_void_p()
        if gpu is None:
            r = lib().kfdb_session_new(os.fsencode(path), name.encode(), ctypes.byref(ptr))
        else:
            gpu = _index(gpu, "gpu", operation)
            why = _lib.require("kfdb_session_new_on_gpu")
            if why:
                raise errors.NotSupported(95, why, operation)
            r = lib().kfdb_session_new_on_gpu(os.fsencode(path), name.encode(), gpu, ctypes.byref(ptr))
        if r < 0:
            # The daemon's reason when it refused the connection (no GPU, a limit).
            why = _text(lib().kfdb_session_last_error(None))
            hint = {2: " (is kfdbrokerd running?)", 111: " (is kfdbrokerd running?)",
                    13: " (may this user use the socket?)"}.get(-r, "")
            raise errors.from_errno(r, f"cannot connect to {path}: {why or os.strerror(-r) + hint}", operation)
        self._ptr = ptr.value
        L = lib()
        self.daemon_version: str = _text(L.kfdb_session_get_daemon_version(self._ptr))
        lim = _lib.kfdb_limits()
        L.kfdb_session_get_limits(self._ptr, ctypes.byref(lim))
        self.limits: Limits = _from_struct(Limits, lim)
        """The limits the daemon announced when the session started."""
        self._batch: Optional[Batch] = None

    def __repr__(self) -> str:
        return f"<kfdbroker.Session {self.socket} {'closed' if self.closed else f'id {self.id}'}>"

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    @property
    def closed(self) -> bool:
        return self._ptr is None

    def close(self) -> None:
        """Close the session: every buffer, event and code object of it is released (here and in the
        daemon). Numpy arrays of its buffers keep their memory mapped until they are collected.
        A second call does nothing."""
        with self._lock:
            if self._ptr is None:
                return
            ptr, self._ptr = self._ptr, None
            for obj in list(self._objects):
                obj._released()
            lib().kfdb_session_free(ptr)

    # ---- internals ----

    def _checked(self, operation: str) -> int:
        if self._ptr is None:
            raise errors.Closed(9, "the session is closed", operation)
        return self._ptr

    def _error(self, r: int, operation: str) -> errors.Error:
        """The exception for libkfdbroker's result r (negative errno), with its message."""
        msg = _text(lib().kfdb_session_last_error(self._ptr)) if self._ptr is not None else ""
        return errors.from_errno(r, msg, operation)

    def _track(self, obj: T) -> T:
        self._objects.add(obj)
        return obj

    def _one_job(self) -> Batch:
        if self._batch is None:
            self._batch = Batch(self)
        return self._batch

    # ---- information ----

    @property
    def gpu(self) -> int:
        """The index of the GPU this session's buffers and work are on (``Session(gpu=...)``,
        ``$KFDBROKER_GPU``, else the first the policy allows); 0 with a library before several GPUs."""
        with self._lock:
            s = self._checked("gpu")
            return 0 if _lib.require("kfdb_session_get_gpu") else int(lib().kfdb_session_get_gpu(s))

    def gpus(self) -> "list[Gpu]":
        """The GPUs the daemon serves that this session's client may use, by index, with what each
        runs now.

        Raises:
            NotSupported: the loaded libkfdbroker is older than KFDBROKER_0.13.
        """
        why = _lib.require("kfdb_gpus_get")
        if why:
            raise errors.NotSupported(95, why, "gpus()")
        arr = (_lib.kfdb_gpu * 16)()
        n = ctypes.c_size_t()
        with self._lock:
            r = lib().kfdb_gpus_get(self._checked("gpus()"), arr, 16, ctypes.byref(n))
            if r < 0:
                raise self._error(r, "gpus()")
        return [_from_struct(Gpu, arr[i]) for i in range(min(n.value, 16))]

    @property
    def id(self) -> int:
        """The session's id in the daemon (``kfdbrokerctl sessions``); it may change when the session reconnects."""
        with self._lock:
            return int(lib().kfdb_session_get_id(self._checked("id")))

    @property
    def reconnects(self) -> int:
        """How many times the session came back after the daemon restarted. Buffers (and their
        contents), events and code objects carry over; jobs that were on the GPU then fail
        (``kfdbroker.Error`` with errno ECANCELED)."""
        with self._lock:
            return int(lib().kfdb_session_get_reconnects(self._checked("reconnects")))

    def set_reconnect_timeout(self, seconds: float) -> None:
        """How long a lost connection is retried before calls raise ``ConnectionLost`` (default
        30 s, or ``$KFDBROKER_RECONNECT_TIMEOUT_MS``); 0 turns reconnecting off."""
        if seconds < 0 or seconds * 1000 > 2**31 - 1:
            raise ValueError(f"reconnect timeout {seconds!r} s: must be 0 to 2147483 s")
        with self._lock:
            r = lib().kfdb_session_set_reconnect_timeout(self._checked("set_reconnect_timeout()"),
                                                         int(seconds * 1000))
            if r < 0:
                raise self._error(r, "set_reconnect_timeout()")

    def has_feature(self, feature: str) -> bool:
        """Whether the daemon announced ``feature`` ("sdma-copy", "events", "compute", ...)."""
        with self._lock:
            return bool(lib().kfdb_session_has_feature(self._checked("has_feature()"), feature.encode()))

    def device(self) -> Device:
        """The daemon's GPU."""
        with self._lock:
            s = self._checked("device()")
            d = _lib.kfdb_device()
            r = lib().kfdb_device_info(s, ctypes.byref(d))
            if r < 0:
                raise self._error(r, "device()")
            n = ctypes.c_uint32()
            r = lib().kfdb_device_compute_queues(s, ctypes.byref(n))
            if r < 0:
                raise self._error(r, "device()")
        return _from_struct(Device, d, compute_queues=n.value)

    def usage(self) -> Usage:
        """This session's buffers, events, jobs and bytes moved, and its limits now."""
        with self._lock:
            u = _lib.kfdb_usage()
            r = lib().kfdb_query(self._checked("usage()"), ctypes.byref(u))
            if r < 0:
                raise self._error(r, "usage()")
            context = ctypes.c_uint64()
            r = lib().kfdb_query_context_bytes(self._checked("usage()"), ctypes.byref(context))
            if r < 0:
                raise self._error(r, "usage()")
        return _from_struct(Usage, u, limits=_from_struct(Limits, u.limits), context_bytes=context.value)

    def status(self) -> Status:
        """The daemon's state over all sessions."""
        with self._lock:
            st = _lib.kfdb_daemon_status()
            r = lib().kfdb_status(self._checked("status()"), ctypes.byref(st))
            if r < 0:
                raise self._error(r, "status()")
        return _from_struct(Status, st)

    # ---- objects ----

    def alloc(self, nbytes: int, placement: str = "gtt", gpu: Optional[int] = None) -> Buffer:
        """Allocate a GPU buffer of at least ``nbytes`` (rounded up to 4 KiB) in ``"gtt"`` (system
        memory) or ``"vram"`` (device memory), on the session's GPU or on GPU ``gpu`` (its index:
        fill it and run kernels on it with a :class:`Batch` of that GPU, ``batch(gpu=...)``).

        Raises:
            QuotaExceeded: over the session's memory or buffer-count limit (the message names it;
                ``BufferMemory=`` holds on each GPU).
            InvalidArgument: ``nbytes`` is 0 or not an int, an unknown placement.
            Error (errno ENODEV): the daemon has no GPU ``gpu``. PermissionDenied: the policy (``Devices=``)
                or the GPU socket the session came through keeps it off that GPU.
            NotSupported: ``gpu`` with a libkfdbroker older than KFDBROKER_0.14.
        """
        operation = f"alloc({nbytes!r}, {placement!r})" if gpu is None else \
            f"alloc({nbytes!r}, {placement!r}, gpu={gpu!r})"
        nbytes = _index(nbytes, "nbytes", operation)
        if placement not in _PLACEMENTS:
            raise errors.InvalidArgument(22, f"placement must be 'gtt' or 'vram', got {placement!r}", operation)
        if gpu is not None:
            why = _lib.require("kfdb_buffer_alloc_on_gpu")
            if why:
                raise errors.NotSupported(95, why, operation)
            gpu = _index(gpu, "gpu", operation)
            if gpu >= _lib.GPU_SESSION:
                raise errors.InvalidArgument(22, f"no GPU index {gpu!r}", operation)
        ptr = ctypes.c_void_p()
        with self._lock:
            if gpu is not None:
                r = lib().kfdb_buffer_alloc_on_gpu(self._checked(operation), nbytes, _PLACEMENTS[placement], gpu,
                                                   ctypes.byref(ptr))
            else:
                r = lib().kfdb_buffer_alloc(self._checked(operation), nbytes, _PLACEMENTS[placement],
                                            ctypes.byref(ptr))
            if r < 0:
                raise self._error(r, operation)
            return self._track(Buffer(self, _pointer(ptr), placement))

    def suballocator(self, placement: str = "gtt", block_size: int = 0) -> SubAllocator:
        """A sub-allocator: slices of a few buffers of ``block_size`` bytes (0: 4 MiB; else a power of
        two from 64 KiB to 256 MiB) in ``"gtt"`` or ``"vram"``, for many small buffers without a
        round trip each. The daemon sees and charges the blocks only: slices of one block are not
        isolated from each other.

        Raises:
            InvalidArgument: an unknown placement, a block size out of range (the message says).
            NotSupported: the loaded libkfdbroker is older than KFDBROKER_0.7.
        """
        operation = f"suballocator({placement!r}, block_size={block_size!r})"
        block_size = _index(block_size, "block_size", operation)
        if placement not in _PLACEMENTS:
            raise errors.InvalidArgument(22, f"placement must be 'gtt' or 'vram', got {placement!r}", operation)
        why = _lib.require("kfdb_suballocator_new")
        if why:
            raise errors.NotSupported(95, why, operation)
        ptr = ctypes.c_void_p()
        with self._lock:
            r = lib().kfdb_suballocator_new(self._checked(operation), _PLACEMENTS[placement], block_size,
                                            ctypes.byref(ptr))
            if r < 0:
                raise self._error(r, operation)
            return self._track(SubAllocator(self, _pointer(ptr), placement, block_size))

    def event(self, auto_reset: bool = False) -> Event:
        """A new event, unsignaled. An auto-reset event is reset by each completed wait."""
        ptr = ctypes.c_void_p()
        with self._lock:
            r = lib().kfdb_event_create(self._checked("event()"), bool(auto_reset), ctypes.byref(ptr))
            if r < 0:
                raise self._error(r, "event()")
            return self._track(Event(self, _pointer(ptr), bool(auto_reset)))

    def load(self, code: Union[PathLike, bytes, bytearray, memoryview]) -> CodeObject:
        """Load a GPU code object (an AMDHSA ELF for the daemon's GPU, e.g. from
        ``clang -target amdgcn-amd-amdhsa -mcpu=gfx1030``) from a file path, or from its bytes.

        Raises:
            NotFound: no such file.
            BadCodeObject: not an AMDHSA code object (the message says what is wrong).
            WrongDevice: built for another GPU.
        """
        if isinstance(code, (bytes, bytearray, memoryview)):
            data, source = bytes(code), "<bytes>"
        else:
            source = os.fsdecode(code)
            try:
                with open(code, "rb") as f:
                    data = f.read()
            except OSError as e:
                raise errors.from_errno(e.errno or 5, f"cannot read {source}: {e.strerror}",
                                        f"load({source!r})") from None
        operation = f"load({source!r})"
        ptr = ctypes.c_void_p()
        with self._lock:
            r = lib().kfdb_code_object_load(self._checked(operation), data, len(data), ctypes.byref(ptr))
            if r < 0:
                raise self._error(r, operation)
            return self._track(CodeObject(self, _pointer(ptr), source))

    def batch(self, gpu: Optional[int] = None) -> Batch:
        """An empty batch of jobs, to submit several at once (see :class:`Batch`); with ``gpu``,
        its jobs run on that GPU (:attr:`Batch.gpu`)."""
        return Batch(self, gpu)

    # ---- one job at a time ----

    def _submit_one(self, add: Any, operation: str) -> Fence:
        with self._lock:
            b = self._one_job()
            try:
                add(b)
            except BaseException:
                if b._ptr is not None and not self.closed:
                    lib().kfdb_batch_reset(b._ptr)
                raise
            try:
                return b.submit()[-1]
            except errors.Error as e:
                e.operation = operation  # the daemon refused this job: name it, not the batch
                raise

    def fill(self, buf: Union[Buffer, Slice], pattern32: Any, offset: int = 0, size: Optional[int] = None) -> Fence:
        """Fill ``size`` bytes of ``buf`` (default: from ``offset`` to the end) with a 32-bit pattern on
        the GPU; returns the job's fence. See :meth:`Batch.fill`."""
        return self._submit_one(lambda b: b.fill(buf, pattern32, offset, size),
                                f"fill({buf!r}, {pattern32!r}, offset={offset!r}, size={size!r})")

    def copy(self, dst: Union[Buffer, Slice], src: Union[Buffer, Slice], size: Optional[int] = None,
             dst_offset: int = 0, src_offset: int = 0) -> Fence:
        """Copy on the GPU from ``src`` to ``dst``; returns the job's fence. See :meth:`Batch.copy`."""
        return self._submit_one(lambda b: b.copy(dst, src, size, dst_offset, src_offset),
                                f"copy({dst!r}, {src!r}, size={size!r}, dst_offset={dst_offset!r}, "
                                f"src_offset={src_offset!r})")

    def dispatch(self, code_object: CodeObject, name: str, grid: Dims, block: Dims, *args: Any) -> Fence:
        """Run kernel ``name`` of ``code_object``; returns the job's fence. See :meth:`Batch.dispatch`.

        Copies and fills run on another engine than dispatches: wait for a fill's fence before a
        dispatch that reads what it wrote (or order them in one :class:`Batch` with an event).

        Raises:
            PermissionDenied: the daemon's policy does not grant this client compute dispatch.
            InvalidArgument: wrong argument count or sizes, bad dimensions (the message names which).
        """
        return self._submit_one(lambda b: b.dispatch(code_object, name, grid, block, *args),
                                f"dispatch({code_object!r}, {name!r}, {grid!r}, {block!r}, ...)")

    def wait(self, fence: Union[Fence, Sequence[Fence]], timeout: Optional[float] = None) -> None:
        """Wait until the job of ``fence`` (or every job of a list of fences) finished; ``timeout``
        in seconds, None waits forever.

        Raises:
            Timeout: not finished in time (the job goes on).
            GPUFault, DeviceError, JobTimeout, ...: the job failed; the message says how.
        """
        fences: Iterable[Fence] = [fence] if isinstance(fence, Fence) else fence
        ms = _timeout_ms(timeout, f"wait(timeout={timeout!r})")
        deadline = time.monotonic() + ms / 1000 if ms >= 0 else None
        for i, f in enumerate(fences):
            operation = f"wait({f!r}, timeout={timeout!r})"
            if not isinstance(f, Fence):
                raise errors.InvalidArgument(22, f"not a Fence: {f!r}", operation)
            if f.session is not self:
                raise errors.InvalidArgument(22, f"{f!r} belongs to another session", operation)
            # Later fences get what is left of the timeout.
            left = ms if i == 0 or deadline is None else max(0, round((deadline - time.monotonic()) * 1000))
            with self._lock:
                r = lib().kfdb_fence_wait(self._checked(operation), f.value, left)
                if r < 0:
                    raise self._error(r, operation)
