# SPDX-License-Identifier: MIT
"""kfdbroker: use an AMD GPU shared by kfdbrokerd, from Python.

A thin layer over libkfdbroker (loaded with ctypes; nothing is compiled at
install time). The daemon does the work and checks every request; this
package gives it Python types, numpy views of GPU buffers and exceptions
that carry the daemon's messages::

    import numpy as np
    import kfdbroker

    with kfdbroker.Session() as s:
        buf = s.alloc(4096)
        s.wait(s.fill(buf, 0xDEADBEEF))
        assert (buf.numpy(np.uint32) == 0xDEADBEEF).all()

Where the library comes from: ``$KFDBROKER_LIBRARY`` (a path) if set, else
``libkfdbroker.so.0`` through the dynamic loader (installed with meson, then
``ldconfig``).
"""
from ._lib import LibraryNotFound
from .buffer import Buffer, BufferRef
from .compute import CodeObject, Kernel, KernelArg, Local
from .errors import (BadCodeObject, Busy, Closed, ConnectionLost, ConnectionRefused, DeviceError, Error, GPUFault,
                     InvalidArgument, JobTimeout, NotFound, NotSupported, PermissionDenied, ProtocolError,
                     QuotaExceeded, Timeout, TooBig, WrongDevice)
from .session import Batch, Device, Event, Fence, Gpu, Limits, Session, Status, Usage, default_socket_path
from .suballoc import Slice, SubAllocator, SubAllocatorStats

__version__ = "0.2.0"

__all__ = [
    "Session", "Buffer", "BufferRef", "SubAllocator", "Slice", "SubAllocatorStats", "Fence", "Event", "Batch", "CodeObject", "Kernel", "KernelArg", "Local",
    "Device", "Gpu", "Limits", "Usage", "Status", "default_socket_path", "LibraryNotFound",
    "Error", "InvalidArgument", "NotFound", "PermissionDenied", "QuotaExceeded", "TooBig", "Busy", "Timeout",
    "JobTimeout", "GPUFault", "DeviceError", "NotSupported", "BadCodeObject", "WrongDevice", "ConnectionLost",
    "ConnectionRefused", "ProtocolError", "Closed",
]
