"""Where the examples find the cluster: ``ROCKETRIO_NAMESRV`` (default 127.0.0.1:9876, what
``rocketrio up`` starts) and an optional ``ROCKETRIO_EXAMPLE_SUFFIX`` added to topic and group
names, so repeated runs on one cluster do not see each other's messages."""

import os

NAMESRV = os.environ.get("ROCKETRIO_NAMESRV", "127.0.0.1:9876")
SUFFIX = os.environ.get("ROCKETRIO_EXAMPLE_SUFFIX", "")


def name(base: str) -> str:
    return f"{base}{SUFFIX}"
