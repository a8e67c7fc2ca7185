"""Which compiled twins the put path and the codec use (sans-io).

``speedups`` is `rocketrio.protocol._speedups` (protocol/speedups/*.c, built by setup.py) when
it imports and ``ROCKETRIO_PURE_PYTHON`` is unset or empty, else None: every compiled function
has a pure-Python twin that stays the reference (tests/unit/protocol/test_speedups.py proves
both give the same bytes and the same errors) and is what runs when this is None. The twins'
callees (zlib-ng's CRC-32, the error classes) are handed to the module here, once.
"""

from __future__ import annotations

import os
import struct
from types import ModuleType

from rocketrio.protocol.message_format import (
    MessageDecodeError,
    MessageSizeError,
    crc32,
    crc32_combine,
)

# From this body size on the record CRC combines the body's own CRC instead of reading the
# body again (message_build._COMBINE_MIN has the figures)
COMBINE_MIN = 2048 if crc32_combine is not None else 1 << 62


def load() -> ModuleType | None:
    """The configured extension, or None (pure Python asked for, or not built)."""
    if os.environ.get("ROCKETRIO_PURE_PYTHON"):
        return None
    try:
        from rocketrio.protocol import _speedups  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - an install without a C compiler
        return None
    _speedups.configure(
        MessageDecodeError, MessageSizeError, struct.error, crc32, crc32_combine, COMBINE_MIN
    )
    return _speedups


speedups = load()
