"""Where the opt-in interop tests find Apache RocketMQ 5.2.0 (its binary distribution and the
classpath file ../shared/tools/rocketmq-5.2.0/setup.sh writes), the JVM flags its tools need on
Java 17, and the skip when either the distribution or a JDK is absent (CI has neither dist)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

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
