# SPDX-License-Identifier: MIT
"""The package installs offline as README.md says (a venv over Debian's
site packages, pip without build isolation) and the README's example runs
from that venv against a daemon on the simulated GPU."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import kernel_path

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(PYTHON_DIR, "README.md")
VENV_COMMAND = "/usr/bin/python3 -m venv --system-site-packages VENV"
PIP_COMMAND = "VENV/bin/pip install --no-build-isolation ./python"


def readme_example() -> str:
    with open(README) as f:
        text = f.read()
    m = re.search(r"## Example\n\n```python\n(.*?)```", text, re.S)
    assert m, "README.md has no ## Example python block"
    return m.group(1)


def test_readme_documents_the_commands_this_test_runs():
    with open(README) as f:
        text = f.read()
    assert VENV_COMMAND in text and PIP_COMMAND in text


def run(args, **kw):
    p = subprocess.run(args, capture_output=True, text=True, timeout=240, **kw)
    assert p.returncode == 0, f"{' '.join(args)} exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


def test_venv_install_runs_the_readme_example(daemon, tmp_path):
    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("no /usr/bin/python3 (Debian's interpreter)")
    # pip builds in the source directory (build/, *.egg-info): give it a copy of python/.
    src = tmp_path / "python"
    shutil.copytree(PYTHON_DIR, src, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__"))
    venv = tmp_path / "VENV"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    run(VENV_COMMAND.replace("VENV", str(venv)).split(), env=env, cwd=tmp_path)
    p = run(PIP_COMMAND.replace("VENV", str(venv)).split(), env=env, cwd=tmp_path)
    assert "Successfully installed kfdbroker-0.2.0" in p.stdout, p.stdout

    py = str(venv / "bin" / "python")
    p = run([py, "-c", "import kfdbroker, os; print(os.path.dirname(kfdbroker.__file__))"], env=env, cwd="/")
    installed = p.stdout.strip()
    assert installed.startswith(str(venv)), f"kfdbroker imported from {installed}, not from the venv"
    assert os.path.exists(os.path.join(installed, "py.typed"))

    saxpy = kernel_path("saxpy")  # skips here, after the install, without clang-15
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(saxpy, run_dir / "saxpy.hsaco")
    (run_dir / "example.py").write_text(readme_example())
    env["KFDBROKER_SOCKET"] = daemon.socket  # the example's Session() finds the daemon here
    p = run([py, "example.py"], env=env, cwd=run_dir)
    assert p.stdout == "saxpy on gfx1030 ok\n", p.stdout
