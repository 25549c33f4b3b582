# SPDX-License-Identifier: MIT
"""Events, fences and batches: waiting with and without timeouts, events
set from the CPU and by jobs, and jobs held by an event."""
import errno
import time

import numpy as np
import pytest

import kfdbroker


def test_event_set_reset_wait(session):
    ev = session.event()
    assert not ev.is_set() and ev.age == 1
    t0 = time.monotonic()
    assert ev.wait(timeout=0.05) is False
    assert time.monotonic() - t0 >= 0.04
    ev.set()
    assert ev.is_set() and ev.age == 2
    assert ev.wait() is True
    assert ev.wait(timeout=0) is True  # manual reset: stays signaled
    ev.reset()
    assert not ev.is_set()
    assert ev.wait(timeout=0) is False


def test_auto_reset_event_is_reset_by_its_wait(session):
    ev = session.event(auto_reset=True)
    ev.set()
    assert ev.wait(timeout=1) is True
    assert not ev.is_set()
    assert ev.wait(timeout=0) is False


def test_destroyed_event_is_refused(session):
    with session.event() as ev:
        pass
    ev.destroy()  # a second destroy does nothing
    for call in (ev.set, ev.reset, ev.wait, ev.is_set):
        with pytest.raises(kfdbroker.Closed) as e:
            call()
        assert e.value.message == f"event {ev.handle} was destroyed"


def test_bad_timeouts_are_named(session):
    ev = session.event()
    for timeout, message in [(-1, "timeout must be >= 0 seconds or None, got -1"),
                             ("1", "timeout must be seconds (a number) or None, got '1'"),
                             (float("nan"), "timeout must be seconds (a number) or None, got nan")]:
        with pytest.raises(kfdbroker.InvalidArgument) as e:
            ev.wait(timeout)
        assert e.value.message == message


def test_a_job_held_by_an_event_times_out_then_runs(session):
    b = session.alloc(4096)
    v = b.numpy(np.uint32)
    v[:] = 0
    gate = session.event()
    with session.batch() as batch:
        batch.wait_for(gate)
        batch.fill(b, 0x5EED)
    hold, fill = batch.fences
    assert fill.value > hold.value
    with pytest.raises(kfdbroker.Timeout) as e:
        session.wait(fill, timeout=0.1)
    assert isinstance(e.value, TimeoutError) and e.value.errno == errno.ETIMEDOUT
    assert e.value.message.startswith(f"fence {fill.value} not done after 100 ms"), e.value.message
    assert not fill.done and (v == 0).all()
    gate.set()
    session.wait(batch.fences, timeout=10)
    assert fill.done and (v == 0x5EED).all()


def test_jobs_signal_events(session):
    b = session.alloc(4096)
    done = session.event()
    batch = session.batch()
    batch.fill(b, 1)
    batch.signal(done)
    assert len(batch) == 2
    fences = batch.submit()
    assert len(fences) == 2 and len(batch) == 0
    assert done.wait(timeout=10) is True
    assert (b.numpy(np.uint32) == 1).all()


def test_fences_are_waited_for_together(session):
    bufs = [session.alloc(4096) for _ in range(4)]
    fences = [session.fill(buf, i) for i, buf in enumerate(bufs)]
    assert [f.value for f in fences] == sorted(f.value for f in fences)
    session.wait(fences, timeout=10)
    assert all(f.done for f in fences)
    assert [int(buf.numpy(np.uint32)[0]) for buf in bufs] == [0, 1, 2, 3]


def test_a_batch_that_raised_is_not_submitted(session):
    b = session.alloc(4096)
    with pytest.raises(kfdbroker.InvalidArgument):
        with session.batch() as batch:
            batch.fill(b, 9)
            batch.fill(b, 9, size=3)
    assert batch.fences == [] and len(batch) == 1
    assert session.usage().jobs_submitted == 0


def test_bad_batch_arguments(session, daemon):
    batch = session.batch()
    with pytest.raises(kfdbroker.InvalidArgument) as e:
        batch.signal(session.event(), engine="gpu")
    assert e.value.message == "engine must be one of auto, sdma, compute, got 'gpu'"
    with kfdbroker.Session(daemon.socket) as other:
        theirs = other.event()
        with pytest.raises(kfdbroker.InvalidArgument) as e:
            batch.wait_for(theirs)
        assert e.value.message == f"{theirs!r} belongs to another session"
        f = other.fill(other.alloc(4096), 1)
        # Done first, so that the fence reads the same in the message and here
        # (freeing the buffer does not wait for the daemon, during which the fill ended).
        f.wait()
        with pytest.raises(kfdbroker.InvalidArgument) as e:
            session.wait(f)
        assert e.value.message == f"{f!r} belongs to another session"
    with pytest.raises(kfdbroker.InvalidArgument) as e:
        batch.submit()
    assert e.value.errno == errno.ENODATA
    assert e.value.message == "kfdb_batch_submit: the batch is empty"


def test_threads_share_a_session_one_call_at_a_time(session):
    import threading

    bufs = [session.alloc(4096) for _ in range(4)]
    failures = []

    def work(i):
        try:
            for k in range(25):
                session.wait(session.fill(bufs[i], i * 1000 + k), timeout=30)
                assert int(bufs[i].numpy(np.uint32)[1023]) == i * 1000 + k
        except Exception as e:  # reported below, with the thread's number
            failures.append((i, e))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert failures == []
    assert session.usage().jobs_completed == 100
