# SPDX-License-Identifier: MIT
"""Compute: code objects, kernels' argument lists, dispatches with Python
and numpy arguments checked against the kernel's metadata, local memory,
faults, and the policy's say."""
import errno
import re

import numpy as np
import pytest

import kfdbroker
from conftest import kernel_path


@pytest.fixture
def saxpy(session):
    return session.load(kernel_path("saxpy"))


def test_load_lists_kernels_and_arguments(session, saxpy):
    assert list(saxpy.kernels) == ["saxpy"]
    k = saxpy.kernels["saxpy"]
    assert [(a.kind, a.offset, a.size) for a in k.args] == \
        [("value", 0, 4), ("buffer", 8, 8), ("buffer", 16, 8), ("value", 24, 4)]
    assert len(k.all_args) > len(k.args) and all(a.kind == "hidden" for a in k.all_args[4:])
    assert k.max_workgroup_size == 256 and k.kernarg_size >= 28
    assert k.signature() == "saxpy(4-byte value, buffer, buffer, 4-byte value)"


def test_usage_counts_the_gpu_context_memory(session, saxpy):
    assert session.usage().context_bytes == 0
    x = session.alloc(4096)
    session.wait(session.dispatch(saxpy, "saxpy", 64, 64, np.float32(1), x, x, 64), timeout=120)
    u = session.usage()
    # Its queue's ring, EOP and CWSR areas and kernel arguments, charged as buffer memory.
    assert u.context_bytes > 64 * 1024
    assert u.buffer_bytes >= u.context_bytes + 4096


def test_load_from_bytes(session):
    with open(kernel_path("vector-add"), "rb") as f:
        co = session.load(f.read())
    assert list(co.kernels) == ["vector_add"] and co.source == "<bytes>"


def test_saxpy_matches_numpy(session, saxpy):
    n = 100_000
    rng = np.random.default_rng(7)
    x_host = rng.standard_normal(n, dtype=np.float32)
    y_host = rng.standard_normal(n, dtype=np.float32)
    x, y = session.alloc(n * 4), session.alloc(n * 4)
    x.numpy(np.float32, n)[:] = x_host
    y.numpy(np.float32, n)[:] = y_host
    f = session.dispatch(saxpy, "saxpy", n, 256, np.float32(2.5), x, y, np.uint32(n))
    session.wait(f, timeout=120)
    want = (np.float64(2.5) * x_host.astype(np.float64) + y_host).astype(np.float32)  # one rounding, as fma
    got = y.numpy(np.float32, n)
    assert np.array_equal(got, want), np.flatnonzero(got != want)[:10]
    # Python numbers work too: 2.0 becomes a float32, n a 4-byte int.
    session.wait(session.dispatch(saxpy, "saxpy", (n,), (128,), 2.0, x, y, n), timeout=120)
    assert np.allclose(y.numpy(np.float32, n), want + 2 * x_host, rtol=1e-6, atol=1e-6)


def test_buffer_at_offset_and_2d_grid(session):
    co = session.load(kernel_path("vector-add"))
    a, b, c = session.alloc(8192), session.alloc(4096), session.alloc(4096)
    a.numpy(np.float32)[:] = np.arange(2048, dtype=np.float32)
    b.numpy(np.float32)[:] = 1000
    c.numpy(np.float32)[:] = 0
    # a from its second half: c[i] = a[1024 + i] + b[i]
    session.wait(session.dispatch(co, "vector_add", 1024, 64, a.at(4096), b, c, 1024), timeout=60)
    assert (c.numpy(np.float32) == np.arange(1024, 2048) + 1000).all()


def test_local_memory_argument(session):
    co = session.load(kernel_path("local-sum"))
    n, wg = 1024, 256
    inp, out = session.alloc(n * 4), session.alloc(4096)
    inp.numpy(np.uint32, n)[:] = np.arange(n, dtype=np.uint32)
    out.numpy(np.uint32)[:] = 0
    f = session.dispatch(co, "local_sum", n, wg, inp, out, n, kfdbroker.Local(wg * 4), kfdbroker.Local(wg * 4))
    session.wait(f, timeout=60)
    got = out.numpy(np.uint32, (n // wg, 2))
    want = [[sum(range(g * wg, (g + 1) * wg)), (g + 1) * wg - 1] for g in range(n // wg)]
    assert got.tolist() == want


def test_wrong_arguments_are_named(session, saxpy):
    x = session.alloc(4096)
    k = "saxpy(4-byte value, buffer, buffer, 4-byte value)"
    cases = [
        ((np.float32(1), x, x), f"kernel {k} takes 4 arguments, got 3"),
        ((np.float32(1), x, x, 1, 2), f"kernel {k} takes 4 arguments, got 5"),
        ((np.float64(1), x, x, 1), "argument 0 of saxpy takes 4 bytes, got numpy.float64 (8 bytes)"),
        ((np.float32(1), x, x, np.uint64(1)), "argument 3 of saxpy takes 4 bytes, got numpy.uint64 (8 bytes)"),
        ((1.0, x, x, 2**32), "argument 3 of saxpy takes 4 bytes: 4294967296 does not fit (-2147483648..4294967295)"),
        ((1e39, x, x, 1), "argument 0 of saxpy is a float32: 1e+39 does not fit"),
        ((x, x, x, 1), f"argument 0 of saxpy is a 4-byte value, got {x!r}"),
        ((1.0, 5, x, 1), "argument 1 of saxpy is a buffer, got 5"),
        ((1.0, x, x, "4"), "argument 3 of saxpy is a 4-byte value: pass an int, a float, a numpy scalar or bytes, "
                           "not str"),
        ((b"\0\0", x, x, 1), "argument 0 of saxpy takes 4 bytes, got 2 bytes"),
        ((np.zeros(2, np.float32), x, x, 1), "argument 0 of saxpy takes one value, got an array of shape (2,)"),
        ((kfdbroker.Local(64), x, x, 1), "argument 0 of saxpy is a 4-byte value, got kfdbroker.Local(64)"),
    ]
    for args, message in cases:
        with pytest.raises(kfdbroker.InvalidArgument) as e:
            session.dispatch(saxpy, "saxpy", 64, 64, *args)
        assert e.value.errno == errno.EINVAL
        assert e.value.message == message, args
    assert session.usage().jobs_submitted == 0


def test_wrong_dimensions_and_kernels_are_named(session, saxpy):
    x = session.alloc(4096)
    args = (np.float32(1), x, x, 1)
    cases = [
        ((0, 64), kfdbroker.InvalidArgument, "grid values must be 1..4294967295, got 0"),
        (((64, 2), 64), kfdbroker.InvalidArgument, "grid has 2 dimensions, block 1: give both the same number"),
        (((1, 1, 1, 1), (1, 1, 1, 1)), kfdbroker.InvalidArgument, "grid needs 1 to 3 dimensions, got 4"),
        ((64, 2.5), kfdbroker.InvalidArgument, "block must hold integers, got 2.5"),
        # The library's own check, against the kernel's metadata.
        ((512, 512), kfdbroker.InvalidArgument,
         'dispatch: 512 work-items per workgroup, kernel "saxpy" allows at most 256'),
    ]
    for (grid, block), cls, message in cases:
        with pytest.raises(cls) as e:
            session.dispatch(saxpy, "saxpy", grid, block, *args)
        assert e.value.message == message
    with pytest.raises(kfdbroker.NotFound) as e:
        session.dispatch(saxpy, "sxapy", 64, 64, *args)
    assert e.value.errno == errno.ENOENT
    assert e.value.message == f"no kernel 'sxapy' in {kernel_path('saxpy')} (it has: saxpy)"


def test_freed_code_object_is_refused(session):
    co = session.load(kernel_path("empty"))
    co.free()
    co.free()
    with pytest.raises(kfdbroker.Closed) as e:
        session.dispatch(co, "empty", 1, 1)
    assert e.value.message == f"code object {co.handle} ({kernel_path('empty')}) was freed"


def test_bad_code_objects_are_named(session, tmp_path):
    with pytest.raises(kfdbroker.NotFound) as e:
        session.load(tmp_path / "missing.hsaco")
    assert e.value.message == f"cannot read {tmp_path}/missing.hsaco: No such file or directory"
    with pytest.raises(kfdbroker.BadCodeObject) as e:
        session.load(b"\x7fELF but not really a code object" * 4)
    assert e.value.errno == errno.ENOEXEC
    assert e.value.message == "load_code_object: ELF class 32 is not ELFCLASS64", e.value.message
    with pytest.raises(kfdbroker.InvalidArgument) as e:
        session.load(b"")
    assert e.value.message == "kfdb_code_object_load: the code object is empty"


def test_a_fault_fails_the_job_and_the_session_goes_on(session):
    co = session.load(kernel_path("fault"))
    b = session.alloc(4096)
    f = session.dispatch(co, "fault", 1, 1, b, 1 << 36)  # a ulong: a Python int of 8 bytes
    with pytest.raises(kfdbroker.GPUFault) as e:
        session.wait(f, timeout=60)
    assert e.value.errno == errno.EFAULT
    assert re.fullmatch(r'GPU memory fault in dispatch of kernel "fault", at (window offset|address) 0x[0-9a-f]+, '
                        r'outside any buffer of yours', e.value.message), \
        e.value.message
    session.wait(session.fill(b, 1), timeout=10)
    assert (b.numpy(np.uint32) == 1).all()


def test_policy_without_compute_refuses_dispatch(make_daemon, tmp_path):
    d = make_daemon({"50-no-compute.conf": "[Limits]\nComputeDispatch=no\n"})
    with kfdbroker.Session(d.socket) as s:
        co = s.load(kernel_path("empty"))
        with pytest.raises(kfdbroker.PermissionDenied) as e:
            s.dispatch(co, "empty", 1, 1)
        assert isinstance(e.value, PermissionError) and e.value.errno == errno.EPERM
        assert e.value.message.startswith("submit.jobs[0].dispatch: compute dispatch is not allowed for this "
                                          "client by policy (ComputeDispatch=no, Isolation=session; rules: "), e.value.message
        assert e.value.operation.startswith(f"dispatch({co!r}, 'empty', 1, 1"), e.value.operation
