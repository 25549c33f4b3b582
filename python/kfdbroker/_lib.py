# SPDX-License-Identifier: MIT
"""libkfdbroker through ctypes: finding the library, the structs of
kfdbroker.h and the prototypes of the functions this package calls.

The structs mirror client/kfdbroker.h field for field. The header promises
they do not change for a symbol version (new fields come with new functions),
and tests/test_abi.py compares every size and offset with what the C compiler
says.
"""
from __future__ import annotations

import ctypes
import os
import threading
from ctypes import (POINTER, Structure, c_bool, c_char, c_char_p, c_int, c_size_t, c_uint, c_uint32,
                    c_uint64, c_void_p)

#: The soname this package was written against (libkfdbroker.so.0, symbol
#: versions KFDBROKER_0.1 and KFDBROKER_0.2).
SONAME = "libkfdbroker.so.0"
#: Environment variable naming the library file to load instead.
LIBRARY_ENV = "KFDBROKER_LIBRARY"

KFDB_TIMEOUT_INFINITE = -1
KFDB_PLACEMENT_GTT = 0
KFDB_PLACEMENT_VRAM = 1
KFDB_WAIT_COMPLETE, KFDB_WAIT_TIMEOUT, KFDB_WAIT_FAIL = 0, 1, 2
KFDB_ENGINE_AUTO, KFDB_ENGINE_SDMA, KFDB_ENGINE_COMPUTE = 0, 1, 2
KFDB_KERNEL_ARG_BY_VALUE = 0
KFDB_KERNEL_ARG_GLOBAL_BUFFER = 1
KFDB_KERNEL_ARG_DYNAMIC_LDS = 2
KFDB_KERNEL_ARG_HIDDEN = 3
KFDB_KERNEL_ARG_UNKNOWN = 4
KFDB_ARG_VALUE, KFDB_ARG_BUFFER, KFDB_ARG_LOCAL = 1, 2, 3


class LibraryNotFound(ImportError):
    """libkfdbroker could not be loaded; the message says where it was looked for."""


class kfdb_limits(Structure):
    _fields_ = [
        ("max_buffer_size", c_uint64),
        ("max_buffer_bytes", c_uint64),
        ("max_buffers", c_uint32),
        ("max_events", c_uint32),
        ("max_jobs_in_flight", c_uint32),
        ("max_jobs_per_submit", c_uint32),
        ("max_message_size", c_uint32),
        ("max_wait_events", c_uint32),
    ]


class kfdb_device(Structure):
    _fields_ = [
        ("backend", c_char * 16),
        ("gfx_name", c_char * 32),
        ("name", c_char * 128),
        ("gpu_id", c_uint32),
        ("vendor_id", c_uint32),
        ("device_id", c_uint32),
        ("cu_count", c_uint32),
        ("vram_size", c_uint64),
        ("kfd_major", c_uint32),
        ("kfd_minor", c_uint32),
        ("sdma_queues", c_uint32),
    ]


class kfdb_usage(Structure):
    _fields_ = [
        ("buffers", c_uint32),
        ("buffer_bytes", c_uint64),
        ("events", c_uint32),
        ("jobs_submitted", c_uint64),
        ("jobs_completed", c_uint64),
        ("jobs_failed", c_uint64),
        ("jobs_in_flight", c_uint32),
        ("bytes_copied", c_uint64),
        ("bytes_filled", c_uint64),
        ("limits", kfdb_limits),
    ]


class kfdb_daemon_status(Structure):
    _fields_ = [
        ("daemon_version", c_char * 32),
        ("backend", c_char * 16),
        ("gfx_name", c_char * 32),
        ("sessions", c_uint32),
        ("jobs_completed", c_uint64),
        ("jobs_failed", c_uint64),
        ("uptime_ns", c_uint64),
        ("buffer_bytes", c_uint64),
        ("gpu_buffers", c_uint32),
        ("jobs_in_flight", c_uint32),
        ("events", c_uint32),
    ]


class kfdb_wait_entry(Structure):
    _fields_ = [("event", c_void_p), ("last_event_age", c_uint64)]


class kfdb_kernel_arg(Structure):
    _fields_ = [("name", c_char_p), ("offset", c_uint32), ("size", c_uint32), ("kind", c_int)]


class kfdb_arg(Structure):
    _fields_ = [
        ("type", c_int),
        ("value", c_void_p),
        ("size", c_size_t),
        ("buffer", c_void_p),
        ("offset", c_uint64),
        ("local_size", c_uint32),
    ]


class kfdb_job_failure(Structure):
    _fields_ = [("fence", c_uint64), ("error", c_int), ("message", c_char * 256)]


class kfdb_slice(Structure):
    _fields_ = [("buffer", c_void_p), ("offset", c_uint64), ("size", c_uint64), ("ptr", c_void_p)]


class kfdb_suballocator_stats(Structure):
    _fields_ = [
        ("blocks", c_uint32),
        ("block_bytes", c_uint64),
        ("slices", c_uint32),
        ("slice_bytes", c_uint64),
        ("pending_frees", c_uint32),
    ]


class kfdb_gpu(Structure):
    _fields_ = [
        ("index", c_uint32),
        ("gfx_name", c_char * 32),
        ("name", c_char * 128),
        ("gpu_id", c_uint32),
        ("node", c_char * 160),
        ("node_reason", c_char * 256),
        ("vram_size", c_uint64),
        ("cu_count", c_uint32),
        ("sessions", c_uint32),
        ("jobs_completed", c_uint64),
        ("jobs_failed", c_uint64),
        ("jobs_in_flight", c_uint32),
        ("gpu_buffers", c_uint32),
    ]


STRUCTS = (kfdb_limits, kfdb_device, kfdb_usage, kfdb_daemon_status, kfdb_wait_entry, kfdb_kernel_arg,
           kfdb_arg, kfdb_job_failure, kfdb_slice, kfdb_suballocator_stats, kfdb_gpu)

_p = c_void_p  # every opaque kfdb_* object pointer
_PROTOTYPES = {
    "kfdb_session_new": (c_int, [c_char_p, c_char_p, POINTER(c_void_p)]),
    "kfdb_session_free": (c_void_p, [_p]),
    "kfdb_default_socket_path": (c_char_p, []),
    "kfdb_session_last_error": (c_char_p, [_p]),
    "kfdb_get_fd": (c_int, [_p]),
    "kfdb_get_event_fd": (c_int, [_p]),
    "kfdb_process": (c_int, [_p]),
    "kfdb_session_get_id": (c_uint64, [_p]),
    "kfdb_session_get_daemon_version": (c_char_p, [_p]),
    "kfdb_session_has_feature": (c_bool, [_p, c_char_p]),
    "kfdb_session_get_context_lost": (c_uint64, [_p]),
    "kfdb_session_get_reconnects": (c_uint64, [_p]),
    "kfdb_session_set_reconnect_timeout": (c_int, [_p, c_int]),
    "kfdb_session_get_limits": (None, [_p, POINTER(kfdb_limits)]),
    "kfdb_device_info": (c_int, [_p, POINTER(kfdb_device)]),
    "kfdb_device_compute_queues": (c_int, [_p, POINTER(c_uint32)]),
    "kfdb_query": (c_int, [_p, POINTER(kfdb_usage)]),
    "kfdb_query_context_bytes": (c_int, [_p, POINTER(c_uint64)]),
    "kfdb_status": (c_int, [_p, POINTER(kfdb_daemon_status)]),
    "kfdb_buffer_alloc": (c_int, [_p, c_uint64, c_int, POINTER(c_void_p)]),
    "kfdb_buffer_get_fd": (c_int, [_p]),
    "kfdb_buffer_get_size": (c_uint64, [_p]),
    "kfdb_buffer_get_handle": (c_uint64, [_p]),
    "kfdb_buffer_free": (c_int, [_p]),
    "kfdb_event_create": (c_int, [_p, c_bool, POINTER(c_void_p)]),
    "kfdb_event_destroy": (c_int, [_p]),
    "kfdb_event_set": (c_int, [_p]),
    "kfdb_event_reset": (c_int, [_p]),
    "kfdb_event_get_age": (c_uint64, [_p]),
    "kfdb_event_is_signaled": (c_bool, [_p]),
    "kfdb_event_get_handle": (c_uint64, [_p]),
    "kfdb_wait_events": (c_int, [_p, POINTER(kfdb_wait_entry), c_size_t, c_bool, c_int, POINTER(c_int)]),
    "kfdb_batch_new": (c_int, [_p, POINTER(c_void_p)]),
    "kfdb_batch_free": (c_void_p, [_p]),
    "kfdb_batch_reset": (None, [_p]),
    "kfdb_batch_get_n_jobs": (c_size_t, [_p]),
    "kfdb_batch_copy": (c_int, [_p, _p, c_uint64, _p, c_uint64, c_uint64]),
    "kfdb_batch_fill": (c_int, [_p, _p, c_uint64, c_uint64, c_uint32]),
    "kfdb_batch_signal_event_on": (c_int, [_p, _p, c_int]),
    "kfdb_batch_wait_event_on": (c_int, [_p, _p, c_int]),
    "kfdb_batch_submit": (c_int, [_p, POINTER(c_uint64), POINTER(c_uint64)]),
    "kfdb_fence_is_done": (c_int, [_p, c_uint64]),
    "kfdb_fence_wait": (c_int, [_p, c_uint64, c_int]),
    "kfdb_code_object_load": (c_int, [_p, c_void_p, c_size_t, POINTER(c_void_p)]),
    "kfdb_code_object_free": (c_int, [_p]),
    "kfdb_code_object_get_handle": (c_uint64, [_p]),
    "kfdb_code_object_get_n_kernels": (c_size_t, [_p]),
    "kfdb_code_object_get_kernel": (c_void_p, [_p, c_size_t]),
    "kfdb_kernel_get_name": (c_char_p, [_p]),
    "kfdb_kernel_get_kernarg_size": (c_uint32, [_p]),
    "kfdb_kernel_get_group_segment_size": (c_uint32, [_p]),
    "kfdb_kernel_get_private_segment_size": (c_uint32, [_p]),
    "kfdb_kernel_get_max_workgroup_size": (c_uint32, [_p]),
    "kfdb_kernel_get_n_args": (c_size_t, [_p]),
    "kfdb_kernel_get_n_explicit_args": (c_size_t, [_p]),
    "kfdb_kernel_get_arg": (c_int, [_p, c_size_t, POINTER(kfdb_kernel_arg)]),
    "kfdb_batch_dispatch": (c_int, [_p, _p, c_char_p, c_uint, POINTER(c_uint32), POINTER(c_uint32),
                                    POINTER(kfdb_arg), c_size_t]),
    "kfdb_job_failure_next": (c_int, [_p, POINTER(kfdb_job_failure)]),
}

#: Functions of later symbol versions, by the version that brought them: a
#: library without them still loads, and what needs them says so when used
#: (:func:`require`).
_OPTIONAL_PROTOTYPES = {
    "KFDBROKER_0.7": {
        "kfdb_suballocator_new": (c_int, [_p, c_int, c_uint64, POINTER(c_void_p)]),
        "kfdb_suballocator_free": (c_void_p, [_p]),
        "kfdb_slice_alloc": (c_int, [_p, c_uint64, c_uint64, POINTER(kfdb_slice)]),
        "kfdb_slice_free": (c_int, [_p, POINTER(kfdb_slice), c_uint64]),
        "kfdb_suballocator_get_stats": (c_int, [_p, POINTER(kfdb_suballocator_stats)]),
    },
    "KFDBROKER_0.13": {
        "kfdb_session_new_on_gpu": (c_int, [c_char_p, c_char_p, c_uint32, POINTER(c_void_p)]),
        "kfdb_session_get_gpu": (c_uint32, [_p]),
        "kfdb_gpus_get": (c_int, [_p, POINTER(kfdb_gpu), c_size_t, POINTER(c_size_t)]),
    },
    "KFDBROKER_0.14": {
        "kfdb_buffer_alloc_on_gpu": (c_int, [_p, c_uint64, c_int, c_uint32, POINTER(c_void_p)]),
        "kfdb_buffer_get_gpu": (c_uint32, [_p]),
        "kfdb_batch_set_gpu": (c_int, [_p, c_uint32]),
        "kfdb_batch_get_gpu": (c_uint32, [_p]),
    },
}

#: kfdb_batch_set_gpu()'s "the session's GPU" (KFDB_GPU_SESSION).
GPU_SESSION = 0xFFFFFFFF
_missing: dict[str, str] = {}  # function -> the symbol version it needs, for those the library lacks

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


def _load() -> ctypes.CDLL:
    path = os.environ.get(LIBRARY_ENV)
    name = path if path else SONAME
    try:
        lib = ctypes.CDLL(name)
    except OSError as e:
        if path:
            raise LibraryNotFound(f"cannot load libkfdbroker from ${LIBRARY_ENV}={path}: {e}") from None
        raise LibraryNotFound(
            f"cannot load {SONAME}: {e}. Install libkfdbroker (meson install, then ldconfig), "
            f"or set {LIBRARY_ENV} to the library's path, e.g. build/client/{SONAME}") from None
    for fname, (restype, argtypes) in _PROTOTYPES.items():
        try:
            fn = getattr(lib, fname)
        except AttributeError:
            raise LibraryNotFound(f"{name} has no {fname}: it is older than this package "
                                  "(KFDBROKER_0.2 is needed)") from None
        fn.restype = restype
        fn.argtypes = argtypes
    for version, protos in _OPTIONAL_PROTOTYPES.items():
        for fname, (restype, argtypes) in protos.items():
            fn = getattr(lib, fname, None)
            if fn is None:
                _missing[fname] = version
                continue
            fn.restype = restype
            fn.argtypes = argtypes
    return lib


def require(fname: str) -> str | None:
    """None if the loaded library has fname, else why not (the symbol version it needs)."""
    lib()
    version = _missing.get(fname)
    if version is None:
        return None
    return f"the loaded libkfdbroker has no {fname}: it is older than {version}"


def lib() -> ctypes.CDLL:
    """The loaded library (loaded on first use). Raises LibraryNotFound."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                _lib = _load()
    return _lib
