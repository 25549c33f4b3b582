# SPDX-License-Identifier: MIT
"""Buffers: allocation, numpy views of the dma-buf mapping, fills and copies
on the GPU, and the errors for bad input, freed buffers and quotas."""
import errno
import os

import numpy as np
import pytest

import kfdbroker
from conftest import GRANT


def test_alloc_rounds_up_and_gives_a_dma_buf(session):
    b = session.alloc(1)
    assert b.size == 4096 and b.placement == "gtt" and not b.freed
    assert os.fstat(b.fd).st_size in (0, 4096)  # a dma-buf (or the simulator's memfd)
    v = session.alloc(5000, "vram")
    assert (v.size, v.placement) == (8192, "vram")
    assert repr(v) == f"<kfdbroker.Buffer {v.handle} vram 8192 bytes>"


def test_numpy_views_share_the_mapping(session):
    b = session.alloc(4096)
    a = b.numpy(np.uint32)
    assert a.shape == (1024,) and a.flags.writeable
    a[:] = np.arange(1024, dtype=np.uint32)
    # Another view, of another type and shape, at an offset: the same bytes, no copy.
    m = b.numpy(np.uint32, shape=(2, 256), offset=2048)
    assert m[0, 0] == 512 and m[1, 255] == 1023
    assert bytes(b.memoryview()[4:8]) == (1).to_bytes(4, "little")
    m[1, 255] = 7
    assert a[1023] == 7


def test_fill_on_the_gpu_shows_through_numpy(session):
    b = session.alloc(16384)
    v = b.numpy(np.uint32)
    v[:] = 0x11111111
    f = session.fill(b, 0xCAFEF00D, offset=4096, size=8192)
    assert isinstance(f, kfdbroker.Fence)
    session.wait(f)
    assert f.done
    assert (v[:1024] == 0x11111111).all()
    assert (v[1024:3072] == 0xCAFEF00D).all()
    assert (v[3072:] == 0x11111111).all()
    # Patterns: a negative int is its int32 bits, a 4-byte numpy scalar its bits.
    session.wait(session.fill(b, -1))
    assert (v == 0xFFFFFFFF).all()
    session.wait(session.fill(b, np.float32(1.5)))
    assert (b.numpy(np.float32) == 1.5).all()


def test_copy_on_the_gpu(session):
    src, dst = session.alloc(8192), session.alloc(8192)
    src.numpy(np.uint32)[:] = np.arange(2048, dtype=np.uint32)
    dst.numpy(np.uint32)[:] = 0
    session.wait(session.copy(dst, src))
    assert (dst.numpy(np.uint32) == np.arange(2048)).all()
    # Part of it, at offsets.
    dst.numpy(np.uint32)[:] = 0
    session.wait(session.copy(dst, src, size=16, dst_offset=4096, src_offset=8))
    d = dst.numpy(np.uint32)
    assert list(d[1024:1028]) == [2, 3, 4, 5] and d[:1024].sum() == 0 and d[1028:].sum() == 0


def test_out_of_range_and_misaligned_jobs_are_named(session):
    small, big = session.alloc(4096), session.alloc(16384)
    cases = [
        (lambda: session.copy(small, big), "copy destination: range 0+16384 exceeds the buffer's 4096 bytes"),
        (lambda: session.copy(big, small, size=8192), "copy source: range 0+8192 exceeds the buffer's 4096 bytes"),
        (lambda: session.copy(big, small, size=8, src_offset=4092),
         "copy source: range 4092+8 exceeds the buffer's 4096 bytes"),
        (lambda: session.copy(big, small, size=8, dst_offset=2), "copy destination: offset 2 is not a multiple of 4"),
        (lambda: session.copy(big, small, size=6), "copy: size 6 is not a multiple of 4"),
        (lambda: session.fill(small, 0, size=0), "fill: size must be > 0"),
        (lambda: session.fill(small, 0, offset=4096),
         "offset 4096 leaves nothing to fill in the buffer's 4096 bytes"),
        (lambda: session.copy(big, small, src_offset=4096),
         "src_offset 4096 leaves nothing to copy in the source's 4096 bytes"),
        (lambda: session.copy(big, small, dst_offset=-4), "dst_offset must be >= 0, got -4"),
        (lambda: session.fill(small, 0, size=4.0), "size must be an integer, got float 4.0"),
    ]
    for call, message in cases:
        with pytest.raises(kfdbroker.InvalidArgument) as e:
            call()
        assert e.value.errno == errno.EINVAL
        assert message in e.value.message, (e.value.message, message)
    # Nothing half-added stays behind: the next job runs alone.
    f = session.fill(small, 3)
    session.wait(f)
    assert (small.numpy(np.uint32) == 3).all()


def test_bad_patterns_are_named(session):
    b = session.alloc(4096)
    for pattern, message in [
        (1.5, "pattern32 must be an int or a 4-byte numpy scalar (numpy.float32(1.0)), got float 1.5"),
        (np.float64(1.0), "pattern32 must be 4 bytes, got numpy.float64 (8 bytes)"),
        (np.uint16(1), "pattern32 must be 4 bytes, got numpy.uint16 (2 bytes)"),
        (2**32, "pattern32 must fit 32 bits (-2**31..2**32-1), got 4294967296"),
        ("x", "pattern32 must be an int or a 4-byte numpy scalar (numpy.float32(1.0)), got str 'x'"),
    ]:
        with pytest.raises(kfdbroker.InvalidArgument) as e:
            session.fill(b, pattern)
        assert e.value.message == message


def test_numpy_views_that_do_not_fit_are_refused(session):
    b = session.alloc(4096)
    cases = [
        (dict(dtype=np.float64, shape=(513,)), "shape (513,) of float64 needs 4104 bytes, the buffer has 4096 "
                                               "from offset 0"),
        (dict(dtype=np.uint32, shape=(1024,), offset=4), "shape (1024,) of uint32 needs 4096 bytes, the buffer has "
                                                         "4092 from offset 4"),
        (dict(dtype="V3"), "4096 bytes from offset 0 are not a whole number of |V3 elements (3 bytes each); "
                           "give shape="),
        (dict(dtype="no-such-type"), "not a numpy dtype: data type 'no-such-type' not understood"),
        (dict(dtype=np.uint8, offset=4097), "offset 4097 is past the buffer's 4096 bytes"),
        (dict(dtype=np.uint8, shape=(-1,)), "shape must be >= 0, got -1"),
    ]
    for kwargs, message in cases:
        with pytest.raises(kfdbroker.InvalidArgument) as e:
            b.numpy(**kwargs)
        assert e.value.message == message, kwargs


def test_freed_buffer_is_refused_but_old_views_stay_readable(session):
    b = session.alloc(4096)
    view = b.numpy(np.uint32)
    session.wait(session.fill(b, 0xABCD))
    b.free()
    b.free()  # a second free does nothing
    assert b.freed and "freed" in repr(b)
    for call in (lambda: session.fill(b, 1), lambda: session.copy(b, b), lambda: b.numpy(),
                 lambda: b.fd, lambda: b.at(0)):
        with pytest.raises(kfdbroker.Closed) as e:
            call()
        assert e.value.message == f"buffer {b.handle} was freed"
    # The array made before free() still reads its memory: no crash.
    assert (view == 0xABCD).all()
    assert session.usage().buffers == 0


def test_buffer_as_context_manager(session):
    with session.alloc(4096) as b:
        assert session.usage().buffers == 1
    assert b.freed and session.usage().buffers == 0


def test_buffer_of_another_session_is_refused(daemon, session):
    with kfdbroker.Session(daemon.socket) as other:
        theirs = other.alloc(4096)
        mine = session.alloc(4096)
        with pytest.raises(kfdbroker.InvalidArgument) as e:
            session.copy(mine, theirs)
        assert e.value.message == f"copy source {theirs!r} belongs to another session"


def test_quota_names_the_limit(make_daemon):
    d = make_daemon({"50-grant.conf": GRANT, "60-small.conf": "[Limits]\nBuffers=2\nBufferMemory=64K\n"})
    with kfdbroker.Session(d.socket) as s:
        s.alloc(4096)
        s.alloc(4096)
        with pytest.raises(kfdbroker.QuotaExceeded) as e:
            s.alloc(4096)
        assert e.value.errno == errno.EDQUOT
        assert "buffer count limit (max_buffers 2, policy Buffers=) reached" in e.value.message, e.value.message
        assert e.value.operation == "alloc(4096, 'gtt')"
    with kfdbroker.Session(d.socket) as s:
        with pytest.raises(kfdbroker.QuotaExceeded) as e:
            s.alloc(128 * 1024)
        assert "BufferMemory=" in e.value.message, e.value.message


def test_bad_alloc_arguments(session):
    for args, cls, message in [
        ((0,), kfdbroker.InvalidArgument, "kfdb_buffer_alloc: size must be > 0"),
        ((-1,), kfdbroker.InvalidArgument, "nbytes must be >= 0, got -1"),
        ((4096, "hbm"), kfdbroker.InvalidArgument, "placement must be 'gtt' or 'vram', got 'hbm'"),
        (("4096",), kfdbroker.InvalidArgument, "nbytes must be an integer, got str '4096'"),
    ]:
        with pytest.raises(cls) as e:
            session.alloc(*args)
        assert e.value.message == message
