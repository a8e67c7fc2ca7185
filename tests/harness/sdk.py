"""The official RocketMQ 5 Python SDK as a separate process (tests/harness/drivers/),
driven by the system tests through the proxy.
"""

from __future__ import annotations

from tests.harness.paths import DRIVERS

DRIVER = str(DRIVERS / "proxy_sdk_driver.py")


META = (("x-mq-client-id", "raw-test-client"),)
