# SPDX-License-Identifier: MIT
"""Sessions: connecting, what the daemon reports, closing, and where the
socket and the library come from."""
import errno
import os
import subprocess
import sys

import pytest

import kfdbroker
from conftest import GRANT


def test_session_reports_the_simulated_device(session):
    dev = session.device()
    assert (dev.backend, dev.gfx_name, dev.cu_count, dev.sdma_queues, dev.compute_queues) == \
        ("sim", "gfx1030", 40, 2, 8)
    assert session.daemon_version == "0.2.0"
    assert session.id >= 1
    assert session.has_feature("compute") and not session.has_feature("no-such-feature")
    # The built-in limits (policy/policy.d/00-defaults.conf): 4096 buffers, 1 GiB each, 4 GiB in
    # all: not fitted to the simulated GPU's 1 GiB, which cannot see a buffer's last copy go
    # (docs/policy.md "Defaults on a shared GPU").
    assert (session.limits.max_buffers, session.limits.max_buffer_size, session.limits.max_buffer_bytes) == \
        (4096, 1 << 30, 4 << 30)


def test_status_and_usage_count_what_the_session_holds(make_daemon):
    d = make_daemon()
    with kfdbroker.Session(d.socket) as s:
        a = s.alloc(10000)
        s.event()
        s.wait(s.fill(a, 7))
        u = s.usage()
        assert (u.buffers, u.buffer_bytes, u.events, u.jobs_completed, u.bytes_filled) == (1, 12288, 1, 1, 12288)
        st = s.status()
        assert (st.sessions, st.buffer_bytes, st.events, st.jobs_completed, st.backend) == (1, 12288, 1, 1, "sim")
    with kfdbroker.Session(d.socket) as s:
        # The first session's buffer and event went with it.
        st = s.status()
        assert (st.sessions, st.buffer_bytes, st.events) == (1, 0, 0)


def test_socket_comes_from_the_environment(daemon, monkeypatch):
    monkeypatch.setenv("KFDBROKER_SOCKET", daemon.socket)
    assert kfdbroker.default_socket_path() == daemon.socket
    with kfdbroker.Session() as s:
        assert s.socket == daemon.socket
        assert s.device().backend == "sim"
    monkeypatch.delenv("KFDBROKER_SOCKET")
    assert kfdbroker.default_socket_path() == "/run/kfdbroker/kfdbroker.sock"


def test_no_daemon_is_named(tmp_path):
    path = str(tmp_path / "nothing.sock")
    with pytest.raises(kfdbroker.NotFound) as e:
        kfdbroker.Session(path)
    assert e.value.errno == errno.ENOENT
    assert e.value.message == f"cannot connect to {path}: No such file or directory (is kfdbrokerd running?)"
    assert str(e.value) == (f"Session({path!r}): cannot connect to {path}: No such file or directory "
                            "(is kfdbrokerd running?) [ENOENT: No such file or directory]")


def test_a_daemon_without_a_gpu_says_why(make_daemon):
    """kfdbrokerd --device=kfd where there is no /dev/kfd: up, and every client is told why."""
    if os.path.exists("/dev/kfd"):
        pytest.skip("this machine has /dev/kfd")
    d = make_daemon(device="kfd")
    with pytest.raises(kfdbroker.Error) as e:
        kfdbroker.Session(d.socket)
    assert e.value.errno == errno.ENODEV
    assert e.value.message == (f"cannot connect to {d.socket}: kfdbrokerd refused the connection: no AMD GPU: "
                               "/dev/kfd missing — see kfdbrokerd(8) to run the simulated GPU")


def test_nobody_listening_is_connection_refused(tmp_path):
    import socket
    path = str(tmp_path / "stale.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind(path)
    s.close()  # the file stays, nothing listens
    with pytest.raises(kfdbroker.ConnectionRefused) as e:
        kfdbroker.Session(path)
    assert isinstance(e.value, ConnectionRefusedError) and e.value.errno == errno.ECONNREFUSED


def test_bad_client_name_is_refused_by_the_library(daemon):
    with pytest.raises(kfdbroker.InvalidArgument) as e:
        kfdbroker.Session(daemon.socket, client_name="x" * 65)
    assert e.value.errno == errno.EINVAL


def test_closed_session_refuses_everything(daemon):
    s = kfdbroker.Session(daemon.socket)
    buf = s.alloc(4096)
    ev = s.event()
    f = s.fill(buf, 1)
    s.close()
    s.close()  # a second close does nothing
    assert s.closed and buf.freed
    for call, op in [(lambda: s.alloc(4096), "alloc(4096, 'gtt')"),
                     (lambda: s.fill(buf, 1), "fill("),
                     (lambda: buf.numpy(), "Buffer.numpy("),
                     (lambda: ev.set(), "Event("),
                     (lambda: s.wait(f), "wait("),
                     (lambda: f.done, "Fence.done"),
                     (lambda: s.device(), "device()")]:
        with pytest.raises(kfdbroker.Closed) as e:
            call()
        assert e.value.errno == errno.EBADF
        assert e.value.message == "the session is closed"
        assert e.value.operation.startswith(op), e.value.operation
        assert isinstance(e.value, ValueError)
    buf.free()  # freeing after close does nothing


def test_context_manager_closes(daemon):
    with kfdbroker.Session(daemon.socket) as s:
        b = s.alloc(1)
    assert s.closed and b.freed
    assert "closed" in repr(s)


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), timeout=60)


def test_library_from_kfdbroker_library(tmp_path):
    missing = str(tmp_path / "libkfdbroker.so.0")
    p = _python("import kfdbroker\ntry:\n  kfdbroker.Session('/nonexistent')\n"
                "except kfdbroker.LibraryNotFound as e:\n  print(e)\n", KFDBROKER_LIBRARY=missing)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"cannot load libkfdbroker from $KFDBROKER_LIBRARY={missing}: "), p.stdout


def test_library_by_soname_says_how_to_get_it(tmp_path):
    """Without $KFDBROKER_LIBRARY the dynamic loader looks for libkfdbroker.so.0."""
    # In a fresh process: in this one the library is loaded already, and dlopen() finds it by soname.
    # meson test puts build/client on LD_LIBRARY_PATH: not here.
    if _python("import ctypes\nctypes.CDLL('libkfdbroker.so.0')", LD_LIBRARY_PATH="").returncode == 0:
        pytest.skip("libkfdbroker.so.0 is installed on this machine: the loader finds it")
    p = _python("import kfdbroker\ntry:\n  kfdbroker.Session('/nonexistent')\n"
                "except ImportError as e:\n  print(type(e).__name__, e)\n", KFDBROKER_LIBRARY="", LD_LIBRARY_PATH="")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("LibraryNotFound cannot load libkfdbroker.so.0: "), p.stdout
    assert "set KFDBROKER_LIBRARY to the library's path" in p.stdout, p.stdout


def test_library_from_ld_library_path(daemon):
    """The soname through LD_LIBRARY_PATH, as an installed library is found."""
    libdir = os.path.dirname(os.environ["KFDBROKER_LIBRARY"])
    p = _python(f"import kfdbroker\nwith kfdbroker.Session({daemon.socket!r}) as s:\n  print(s.device().gfx_name)\n",
                KFDBROKER_LIBRARY="", LD_LIBRARY_PATH=libdir)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "gfx1030\n"


def test_policy_limits_reach_the_session(make_daemon):
    d = make_daemon({"50-grant.conf": GRANT, "60-small.conf": "[Limits]\nBuffers=3\nEvents=2\n"})
    with kfdbroker.Session(d.socket) as s:
        assert (s.limits.max_buffers, s.limits.max_events) == (3, 2)


def test_a_session_survives_a_daemon_restart(make_daemon):
    np = pytest.importorskip("numpy")
    d = make_daemon()
    with kfdbroker.Session(d.socket) as s:
        a, b = s.alloc(1 << 16), s.alloc(1 << 16)
        va, vb = a.numpy(np.uint32), b.numpy(np.uint32)
        va[:] = np.arange(va.size, dtype=np.uint32)
        assert d.restart() == 0
        # Same buffers, same memory, same numpy views: the copy goes through the new daemon.
        s.wait(s.copy(b, a), timeout=20)
        assert (vb == np.arange(vb.size, dtype=np.uint32)).all()
        assert s.reconnects == 1 and s.id >= 1
        s.set_reconnect_timeout(0)
        with pytest.raises(ValueError):
            s.set_reconnect_timeout(-1)


def _daemon_fds(d) -> int:
    return len(os.listdir(f"/proc/{d.proc.pid}/fd"))


def _settled_fds(d, expected: int) -> int:
    import time

    n = _daemon_fds(d)
    for _ in range(300):
        if n == expected:
            break
        time.sleep(0.01)
        n = _daemon_fds(d)
    return n


def _stable_fds(d) -> int:
    # The daemon's fds once it has settled after start (its start-up closes
    # some a little later): the same count twice, 100 ms apart.
    import time

    n = _daemon_fds(d)
    for _ in range(50):
        time.sleep(0.1)
        m = _daemon_fds(d)
        if m == n:
            break
        n = m
    return n


def test_an_idle_session_costs_the_daemon_its_socket_alone(make_daemon):
    # The binding asks for a lazy session through libkfdbroker (docs/protocol.md "Lazy
    # sessions"): the session page, its eventfd, the submit ring and the fence page come
    # with the first job, which still completes.
    d = make_daemon()
    base = _stable_fds(d)
    with kfdbroker.Session(d.socket) as s:
        assert s.has_feature("lazy-session")
        assert _settled_fds(d, base + 1) == base + 1
        a = s.alloc(4096)
        s.wait(s.fill(a, 0x5A5A5A5A))
        assert bytes(a.memoryview()[:4]) == b"\x5a\x5a\x5a\x5a"
        # Its socket, the buffer (one fd on the simulated GPU), the eventfd, the ring's
        # doorbell and the fence page.
        assert _settled_fds(d, base + 5) == base + 5
    assert _settled_fds(d, base) == base


def test_a_session_on_each_of_two_gpus(make_daemon):
    # kfdbrokerd --sim-gpus=2: Session(gpu=1) is on GPU 1, the default on GPU 0;
    # gpus() lists both; a GPU the daemon lacks is named.
    d = make_daemon(extra=["--sim-gpus=2"])
    with kfdbroker.Session(d.socket) as s0, kfdbroker.Session(d.socket, gpu=1) as s1:
        assert (s0.gpu, s1.gpu) == (0, 1)
        gpus = s1.gpus()
        assert [g.index for g in gpus] == [0, 1]
        assert gpus[1].gfx_name == "gfx1030" and gpus[0].gpu_id != gpus[1].gpu_id
        assert "0000:04:00.0" in gpus[1].node
        a = s1.alloc(4096)
        s1.wait(s1.fill(a, 0x11223344))
        assert bytes(a.memoryview()[:4]) == b"\x44\x33\x22\x11"
        assert s1.gpus()[1].jobs_completed == 1
    with pytest.raises(kfdbroker.Error) as e:
        kfdbroker.Session(d.socket, gpu=2)
    assert e.value.errno == errno.ENODEV
    assert "no GPU 2: this daemon serves 2" in str(e.value)


def test_one_session_on_two_gpus(make_daemon):
    # alloc(gpu=1) puts a buffer on GPU 1, batch(gpu=1) runs jobs there; a copy
    # takes a buffer of the other GPU; a bad GPU is named.
    d = make_daemon(extra=["--sim-gpus=2"])
    with kfdbroker.Session(d.socket) as s:
        a = s.alloc(4096)
        b = s.alloc(4096, "vram", gpu=1)
        assert (a.gpu, b.gpu) == (0, 1)
        with s.batch(gpu=1) as batch:
            assert batch.gpu == 1
            batch.fill(b, 0x11223344)
        s.wait(batch.fences)
        # Jobs on two GPUs are ordered by fences or events only: the copy after the fill is done.
        with s.batch() as batch:
            assert batch.gpu is None
            batch.copy(a, b)
        s.wait(batch.fences)
        assert bytes(a.memoryview()[:4]) == b"\x44\x33\x22\x11"
        with pytest.raises(kfdbroker.Error) as e:
            s.alloc(4096, gpu=7)
        assert e.value.errno == errno.ENODEV
        assert "alloc_buffer.gpu: no GPU 7: this daemon serves 2" in str(e.value)
