"""The official RocketMQ 5 Python SDK as a separate process (tests/harness/drivers/),
driven by the system tests through the proxy.
"""

from __future__ import annotations

import subprocess
import sys

from tests.harness.paths import DRIVERS

DRIVER = str(DRIVERS / "proxy_sdk_driver.py")


META = (("x-mq-client-id", "raw-test-client"),)


def rr(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketrio.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
