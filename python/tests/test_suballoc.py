# SPDX-License-Identifier: MIT
"""The sub-allocator from Python: slices of a few daemon buffers, filled and
copied on the GPU and viewed with numpy; jobs stay inside their slice; a free
after a fence keeps the range until the job is done; and clear errors for
freed slices, other allocators' slices and closed allocators."""
import numpy as np
import pytest

import kfdbroker


def test_many_slices_share_a_few_blocks(session):
    with session.suballocator() as a:
        before = session.usage().buffers
        slices = [a.alloc(1000) for _ in range(100)]
        st = a.stats()
        assert (st.blocks, st.slices) == (1, 100), st
        assert st.block_bytes == 4 << 20 and st.slice_bytes == 100 * 1024
        assert session.usage().buffers == before + 1, "one daemon buffer for 100 slices"
        ranges = sorted((s.offset, s.offset + s.size) for s in slices)
        assert all(end <= nxt for (_, end), (nxt, _) in zip(ranges, ranges[1:])), "slices overlap"
    assert session.usage().buffers == before, "close() gives the blocks back"


def test_fill_and_copy_slices_on_the_gpu(session):
    with session.suballocator() as a:
        x, y = a.alloc(4096), a.alloc(4096)
        neighbour = a.alloc(4096)
        neighbour.numpy(np.uint32)[:] = 7
        session.wait(session.fill(x, np.float32(2.5)))
        assert (x.numpy(np.float32) == 2.5).all()
        session.wait(session.copy(y, x, size=1024, dst_offset=2048))
        v = y.numpy(np.float32)
        assert (v[512:768] == 2.5).all() and not v[:512].any()
        assert (neighbour.numpy(np.uint32) == 7).all(), "a job on a slice reached its neighbour"
        # A buffer and a slice in one copy, both ways.
        b = session.alloc(8192)
        session.wait(session.copy(b, x, dst_offset=4096))
        assert (b.numpy(np.float32)[1024:] == 2.5).all()
        session.wait(session.fill(b, 9))
        session.wait(session.copy(y, b, size=16))
        assert (y.numpy(np.uint32)[:4] == 9).all()


def test_a_job_may_not_reach_past_its_slice(session):
    with session.suballocator() as a:
        s = a.alloc(4096)
        with pytest.raises(kfdbroker.InvalidArgument, match="outside the slice's 4096 bytes"):
            session.fill(s, 0, offset=2048, size=4096)
        with pytest.raises(kfdbroker.InvalidArgument, match="past the slice's 4096 bytes"):
            session.fill(s, 0, offset=4096)
        other = a.alloc(8192)
        with pytest.raises(kfdbroker.InvalidArgument, match="reach past the slice's 4096 bytes"):
            session.copy(s, other)
        with pytest.raises(kfdbroker.InvalidArgument, match="does not fit|needs 8192 bytes"):
            s.numpy(np.uint32, shape=2048)


def test_a_free_after_a_fence_keeps_the_range_until_the_job_is_done(session):
    with session.suballocator(block_size=64 << 10) as a:
        s = a.alloc(64 << 10)  # the whole block
        ev = session.event()
        with session.batch() as b:
            b.wait_for(ev, "sdma")
            b.fill(s, 1)
        a.free(s, after=b.fences[-1])
        assert a.stats().pending_frees == 1
        t = a.alloc(64 << 10)
        assert t.block_handle != s.block_handle, "the range was handed out while its job waited"
        ev.set()
        session.wait(b.fences[-1])
        assert a.stats().pending_frees == 0


def test_bad_frees_and_closed_objects_are_errors(session, make_daemon):
    a, other = session.suballocator(), session.suballocator()
    s = a.alloc(256)
    with pytest.raises(kfdbroker.InvalidArgument, match="not a slice of this sub-allocator"):
        other.free(s)
    a.free(s)
    with pytest.raises(kfdbroker.Closed, match="was freed"):
        a.free(s)
    with pytest.raises(kfdbroker.Closed, match="was freed"):
        session.fill(s, 0)
    t = a.alloc(256)
    a.close()
    a.close()
    with pytest.raises(kfdbroker.Closed, match="sub-allocator was closed"):
        a.alloc(256)
    with pytest.raises(kfdbroker.Closed):
        t.numpy()
    with pytest.raises(kfdbroker.InvalidArgument, match="block size|block_size"):
        session.suballocator(block_size=1000)
    with pytest.raises(kfdbroker.InvalidArgument, match="placement"):
        session.suballocator("disk")
    with kfdbroker.Session(make_daemon().socket) as s2:
        u = s2.suballocator().alloc(256)
        with pytest.raises(kfdbroker.InvalidArgument, match="another session"):
            session.fill(u, 0)
    other.close()


def test_views_outlive_the_slice(session):
    a = session.suballocator()
    s = a.alloc(1024)
    v = s.numpy(np.uint8)
    v[:] = 3
    a.free(s)
    a.close()
    assert (v == 3).all(), "a view keeps its own mapping of the block"
    session.close()
    assert (v == 3).all()
