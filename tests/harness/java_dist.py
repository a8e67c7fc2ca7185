"""Where the opt-in interop tests find Apache RocketMQ 5.2.0 (its binary distribution and the
classpath file ../shared/tools/rocketmq-5.2.0/setup.sh writes), the JVM flags its tools need on
Java 17, the skip when either the distribution or a JDK is absent (CI has neither dist), and a
test's Java driver compiled and run for the JSON line it prints, and `java_interop`: the driver
compiled beside a NameServer and a broker with one topic, stopped whatever fails."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from tests.harness.system import create_topic_settled, launch_ns_and_broker, stop_processes

DIST = os.environ.get("RMQ_DIST", "/tmp/rocketmq-5.2.0/rocketmq-all-5.2.0-bin-release")
CP_FILE = os.environ.get("RMQ_CP_FILE", "/tmp/rocketmq-5.2.0-home/cp2.txt")
# what upstream's tools and clients reflect into on Java 17 (their launch scripts pass the same)
JAVA_OPENS = [
    f"--add-{kind}=java.base/{pkg}=ALL-UNNAMED"
    for kind, pkg in [
        ("opens", "java.lang"), ("opens", "java.util"), ("opens", "java.nio"),
        ("opens", "sun.nio.ch"), ("opens", "java.lang.reflect"), ("opens", "java.math"),
        ("exports", "sun.nio.ch"),
    ]
]  # fmt: skip


def java_classpath(*, javac: bool = True) -> str:
    """The distribution's classpath (its lib jars), or skip the test: no distribution, or no
    JDK (``javac``) when the test compiles a Java driver."""
    if not (Path(DIST) / "lib").is_dir() or not Path(CP_FILE).exists():
        pytest.skip(f"Apache RocketMQ 5.2.0 dist absent ({DIST}, {CP_FILE}); CI has none")
    if shutil.which("javac" if javac else "java") is None:
        pytest.skip("no JDK (javac) on PATH" if javac else "no java on PATH")
    return Path(CP_FILE).read_text(encoding="utf-8").strip()


def compile_driver(source: Path, tmp_path: Path, cp: str) -> Path:
    """A test's Java driver (one .java file) compiled against the distribution; its classes."""
    classes = tmp_path / "classes"
    subprocess.run(["javac", "-d", str(classes), "-cp", cp, str(source)], check=True)
    return classes


def run_driver(
    classes: Path, cp: str, work: str, main: str, *args: str, timeout: float = 180
) -> dict[str, Any]:
    """Run a compiled driver's ``main`` class (its JVM's home under ``work``) and return the
    JSON object its last output line prints; a driver that fails or hangs fails the test with
    the end of its stderr."""
    cmd = [
        "java", "-Xms128m", "-Xmx384m", *JAVA_OPENS, "-Duser.home=" + work,
        "-Drocketmq.client.logUseSlf4j=false", "-cp", f"{classes}:{cp}", main, *args,
    ]  # fmt: skip
    try:
        out = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, check=False, cwd=DIST
        )
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else str(e.stderr)
        pytest.fail(f"the Java side did not finish: {err[-3000:]}")
    assert out.returncode == 0, out.stderr[-3000:]
    res: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    print(json.dumps(res))
    return res


@attrs.frozen
class JavaInterop:
    """A NameServer and broker ``broker-a`` running for a compiled Java driver."""

    ns: str
    broker: str
    cp: str
    work: str
    classes: Path

    def run(self, main: str, *args: str, timeout: float = 180) -> dict[str, Any]:
        """`run_driver` of this interop's compiled driver."""
        return run_driver(self.classes, self.cp, self.work, main, *args, timeout=timeout)


@contextlib.contextmanager
def java_interop(
    source: Path, tmp_path: Path, topic: str, queues: int, *, settle_s: float = 5,
    **broker_conf: str,
) -> Iterator[JavaInterop]:  # fmt: skip
    """``source`` compiled (or the test skipped), a NameServer and a broker (extra keys from
    ``broker_conf``) started under ``tmp_path`` with ``topic`` created and settled in the
    routes; both processes stopped when the block ends, whatever fails."""
    cp = java_classpath()
    classes = compile_driver(source, tmp_path, cp)
    work = str(tmp_path)
    procs: list[subprocess.Popen[str]] = []
    try:
        ns, broker = launch_ns_and_broker(work, procs, **broker_conf)
        trio.run(create_topic_settled, ns, broker, topic, queues, settle_s)
        yield JavaInterop(ns, broker, cp, work, classes)
    finally:
        stop_processes(procs)
