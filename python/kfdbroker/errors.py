# SPDX-License-Identifier: MIT
"""The exceptions of kfdbroker.

Every failure is a :class:`Error`, an :class:`OSError` carrying the errno
the daemon or libkfdbroker returned (``.errno``), the daemon's or library's
message naming what was wrong (``.message``) and what was being done
(``.operation``). The subclasses pick out the errno values a program handles
differently, and also derive from the matching built-in exception where there
is one (``PermissionDenied`` is a ``PermissionError``, ``Timeout`` a
``TimeoutError``, ``InvalidArgument`` a ``ValueError``...).
"""
from __future__ import annotations

import errno as _errno
import os
from typing import Tuple

__all__ = [
    "Error", "InvalidArgument", "NotFound", "PermissionDenied", "QuotaExceeded", "TooBig", "Busy",
    "Timeout", "JobTimeout", "GPUFault", "DeviceError", "NotSupported", "BadCodeObject", "WrongDevice",
    "ConnectionLost", "ConnectionRefused", "ProtocolError", "Closed",
]


class Error(OSError):
    """A kfdbroker call failed.

    Attributes:
        errno: the errno value (positive), e.g. ``errno.EDQUOT``.
        strerror: its text from the C library.
        message: the daemon's or libkfdbroker's message naming the bad field
            or the limit ("" when there is none).
        operation: what this package was doing, e.g. ``"alloc(4096, 'gtt')"``.
    """

    def __init__(self, errno: int, message: str = "", operation: str = ""):
        super().__init__(errno, os.strerror(errno))
        self.message = message
        self.operation = operation

    def __str__(self) -> str:
        name = _errno.errorcode.get(self.errno, str(self.errno))
        text = self.message or self.strerror
        head = f"{self.operation}: " if self.operation else ""
        return f"{head}{text} [{name}: {self.strerror}]" if self.message else f"{head}{text} [{name}]"

    def __reduce__(self) -> Tuple[type, Tuple[int, str, str]]:
        return (type(self), (self.errno, self.message, self.operation))


class InvalidArgument(Error, ValueError):
    """EINVAL (and ENAMETOOLONG, ENODATA): a bad argument; the message names it."""


class NotFound(Error, LookupError):
    """ENOENT: no such kernel, handle, socket or file."""


class PermissionDenied(Error, PermissionError):
    """EPERM or EACCES: the policy does not allow it (compute dispatch), or the socket is not ours to use."""


class QuotaExceeded(Error):
    """EDQUOT: over one of the session's limits; the message names the limit and the policy key."""


class TooBig(Error):
    """E2BIG: a batch over the daemon's jobs-per-submit, a code object over its size limit."""


class Busy(Error):
    """EBUSY: jobs in flight still use the object."""


class Timeout(Error, TimeoutError):
    """ETIMEDOUT: a wait ran out of time (the job or event may still complete)."""


class JobTimeout(Error, TimeoutError):
    """ETIME: the daemon stopped a job that ran past the policy's JobTimeout=."""


class GPUFault(Error):
    """EFAULT: a job's GPU memory access faulted; the message names the address and kernel."""


class DeviceError(Error):
    """EIO: the GPU stopped a job (an illegal instruction, a reset)."""


class NotSupported(Error):
    """EOPNOTSUPP: the daemon or its device does not offer this (e.g. no compute queue)."""


class BadCodeObject(Error):
    """ENOEXEC: not an AMDHSA code object; the message says what is wrong with the ELF."""


class WrongDevice(Error):
    """EXDEV: a code object built for another GPU."""


class ConnectionLost(Error, ConnectionResetError):
    """ECONNRESET or EPIPE: the daemon closed the connection."""


class ConnectionRefused(Error, ConnectionRefusedError):
    """ECONNREFUSED: nothing listens on the socket."""


class ProtocolError(Error):
    """EPROTO, EPROTONOSUPPORT or EBADMSG: the daemon speaks something this library does not."""


class Closed(Error, ValueError):
    """EBADF: the session is closed, or the buffer, event or code object was freed."""


_BY_ERRNO = {
    _errno.EINVAL: InvalidArgument,
    _errno.ENAMETOOLONG: InvalidArgument,
    _errno.ENODATA: InvalidArgument,
    _errno.ENOENT: NotFound,
    _errno.EPERM: PermissionDenied,
    _errno.EACCES: PermissionDenied,
    _errno.EDQUOT: QuotaExceeded,
    _errno.E2BIG: TooBig,
    _errno.EBUSY: Busy,
    _errno.ETIMEDOUT: Timeout,
    _errno.ETIME: JobTimeout,
    _errno.EFAULT: GPUFault,
    _errno.EIO: DeviceError,
    _errno.EOPNOTSUPP: NotSupported,
    _errno.ENOEXEC: BadCodeObject,
    _errno.EXDEV: WrongDevice,
    _errno.ECONNRESET: ConnectionLost,
    _errno.EPIPE: ConnectionLost,
    _errno.ECONNREFUSED: ConnectionRefused,
    _errno.EPROTO: ProtocolError,
    _errno.EPROTONOSUPPORT: ProtocolError,
    _errno.EBADMSG: ProtocolError,
    _errno.EBADF: Closed,
}


def error_class(errno: int) -> type[Error]:
    """The exception class for a (positive) errno value."""
    return _BY_ERRNO.get(errno, Error)


def from_errno(errno: int, message: str = "", operation: str = "") -> Error:
    """An exception of the right class for errno (positive or negated)."""
    errno = abs(errno)
    return error_class(errno)(errno, message, operation)
