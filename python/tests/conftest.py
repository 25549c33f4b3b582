# SPDX-License-Identifier: MIT
"""Fixtures: a real kfdbrokerd on the simulated GPU, started by the tests like
tests/integration/harness.c does: a temporary socket and a temporary policy
directory granting the current user compute dispatch.

Paths come from the environment meson sets (KFDBROKERD, KFDBROKER_LIBRARY,
KFDBROKER_TEST_KERNELS, KFDBROKER_TEST_ABI_LAYOUT); run by hand after
``./dev build`` they default to the tree's build/ directory.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Callable, Iterator, Optional, Sequence

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, "build")


def _env_path(name: str, default: str) -> str:
    return os.environ.get(name) or default


KFDBROKERD = _env_path("KFDBROKERD", os.path.join(BUILD, "daemon", "kfdbrokerd"))
KERNEL_DIR = _env_path("KFDBROKER_TEST_KERNELS", os.path.join(BUILD, "tests", "kernels"))
os.environ.setdefault("KFDBROKER_LIBRARY", os.path.join(BUILD, "client", "libkfdbroker.so.0"))
# The tests name their sockets; a value from the caller's shell must not leak in.
os.environ.pop("KFDBROKER_SOCKET", None)

GRANT = "[Match]\nUser={uid}\n[Limits]\nComputeDispatch=yes\n"


class Daemon:
    """kfdbrokerd --device=sim on a private socket, with the policy files given."""

    def __init__(self, policy: dict[str, str], device: str = "sim", extra: Sequence[str] = ()):
        if not os.access(KFDBROKERD, os.X_OK):
            pytest.fail(f"no kfdbrokerd at {KFDBROKERD} (run through meson test, or ./dev build first)")
        self.dir = tempfile.mkdtemp(prefix="kfdbroker-pytest.")
        self.socket = os.path.join(self.dir, "sock")
        self.log = os.path.join(self.dir, "daemon.log")
        policy_dir = os.path.join(self.dir, "policy.d")
        os.mkdir(policy_dir)
        for name, text in policy.items():
            with open(os.path.join(policy_dir, name), "w") as f:
                f.write(text.format(uid=os.getuid()))
        self.policy_dir = policy_dir
        self.device = device
        self.extra = list(extra)
        self._spawn()

    def _spawn(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [KFDBROKERD, "--no-config", f"--device={self.device}", "--listen", self.socket, f"--policy-dir={self.policy_dir}",
                 "--log-target=stderr", *self.extra], stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"kfdbrokerd exited during start-up ({self.proc.returncode}):\n{self.log_text()}")
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
                    s.connect(self.socket)
                return
            except OSError:
                time.sleep(0.01)
        self.proc.kill()
        pytest.fail(f"kfdbrokerd did not listen within 5 s:\n{self.log_text()}")

    def log_text(self) -> str:
        with open(self.log, errors="replace") as f:
            return f.read()

    def stop(self) -> int:
        """SIGTERM; the exit status (the log is kept for the caller until cleanup)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def restart(self, sig: int = signal.SIGTERM) -> int:
        """Stops the daemon with sig (SIGKILL: a crash) and starts it again on the same socket;
        returns how the old one ended."""
        self.proc.send_signal(sig)
        rc = self.proc.wait(30)
        self._spawn()
        return rc

    def finish(self) -> None:
        rc = self.stop()
        log = self.log_text()
        shutil.rmtree(self.dir, ignore_errors=True)
        assert rc == 0, f"kfdbrokerd exited with status {rc} on SIGTERM; its log:\n{log}"


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    """One daemon for the whole run; the current user may dispatch."""
    d = Daemon({"50-grant.conf": GRANT})
    yield d
    d.finish()


@pytest.fixture
def make_daemon() -> Iterator[Callable[..., Daemon]]:
    """A daemon of the test's own, with the policy files given (name -> text, {uid} expanded)."""
    started: list[Daemon] = []

    def make(policy: Optional[dict[str, str]] = None, device: str = "sim", extra: Sequence[str] = ()) -> Daemon:
        d = Daemon(policy if policy is not None else {"50-grant.conf": GRANT}, device, extra)
        started.append(d)
        return d

    yield make
    for d in started:
        d.finish()


@pytest.fixture
def session(daemon: Daemon):
    import kfdbroker

    with kfdbroker.Session(daemon.socket, client_name="pytest") as s:
        yield s


def kernel_path(name: str) -> str:
    """tests/kernels/NAME.cl built by meson; skips the test when the corpus was not built."""
    path = os.path.join(KERNEL_DIR, name + ".hsaco")
    if not os.path.exists(path):
        pytest.skip(f"{path} was not built (clang-15 and rocm-device-libs build the kernel corpus; "
                    "run through meson test)")
    return path
