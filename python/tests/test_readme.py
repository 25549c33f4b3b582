# SPDX-License-Identifier: MIT
"""The top-level README's Python example runs as written (python/README.md's
runs from a venv in test_install.py)."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_top_level_readme_example_runs(daemon):
    with open(os.path.join(ROOT, "README.md")) as f:
        m = re.search(r"## Python\n\n```python\n(.*?)```", f.read(), re.S)
    assert m, "README.md has no ## Python example"
    env = dict(os.environ, KFDBROKER_SOCKET=daemon.socket,
               PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, "-c", m.group(1)], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
