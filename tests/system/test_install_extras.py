"""Install what you use: a fresh venv with ``pip install .`` (no extras) has neither pyspark
nor grpc, `rocketrio analyze` and `rocketrio proxy` say which extra to install, the public
client imports and `rocketrio up` runs its demo. About 75 s on a quiet machine (the
dependencies are downloaded into a new venv), so it runs with --long."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.paths import REPO
from tests.harness.system import free_up_ports

pytestmark = [pytest.mark.system, pytest.mark.long]


def _run(*cmd: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def test_base_install_has_no_spark_and_no_grpc_and_runs_up(tmp_path: Path) -> None:
    src = tmp_path / "src"
    archive = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True
    ).stdout.split(b"\0")
    for rel in filter(None, archive):  # the checkout's tracked files, without its .venv
        path = REPO / rel.decode()
        if path.is_file():
            (src / rel.decode()).parent.mkdir(parents=True, exist_ok=True)
            (src / rel.decode()).write_bytes(path.read_bytes())
    venv = tmp_path / "venv"
    assert _run(sys.executable, "-m", "venv", str(venv)).returncode == 0
    py, rr = str(venv / "bin" / "python"), str(venv / "bin" / "rocketrio")
    r = _run(py, "-m", "pip", "install", "-q", str(src), timeout=900)
    assert r.returncode == 0, r.stderr
    r = _run(
        py, "-c", "import importlib.util as u; print(u.find_spec('pyspark'), u.find_spec('grpc'))"
    )
    assert r.stdout.split() == ["None", "None"], r.stdout

    r = _run(py, "-c", "from rocketrio.client import Producer, PushConsumer, Message")
    assert r.returncode == 0, r.stderr
    r = _run(rr, "analyze", str(tmp_path))
    assert r.returncode == 1 and "pip install 'rocketrio[analysis]'" in r.stderr, r.stderr
    r = _run(rr, "proxy", "-n", "127.0.0.1:9876")
    assert r.returncode == 1 and "pip install 'rocketrio[proxy]'" in r.stderr, r.stderr

    base = free_up_ports("single", str(tmp_path / "c"))
    r = _run(
        rr, "up", "--mode", "single", "--dir", str(tmp_path / "c"), "--namesrv-port", str(base),
        "--broker-port", str(base + 10), "--no-console", "--exit-after-demo", "--demo-count", "20",
        timeout=180,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "consumed 20 distinct messages" in r.stdout, r.stdout
    assert os.path.isdir(tmp_path / "c")
