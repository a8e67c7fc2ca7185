"""The compiled extension for twin tests, even in a run that asked for pure Python
(ROCKETRIO_PURE_PYTHON=1 leaves the product on the Python twins, not the tests that compare
them): `extension_in` loads it, fails the test when it is not built (CI must test the compiled
path), and sets it as ``_speedups`` of each module given until the context ends."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from rocketrio.protocol import compiled, remoting


@contextlib.contextmanager
def extension_in(*modules: ModuleType, remoting_configured: bool = False) -> Iterator[Any]:
    """The loaded extension as ``_speedups`` of ``modules``; with ``remoting_configured`` its
    ROCKETMQ header codec configured (`remoting` does that at import when it picks the C)."""
    with pytest.MonkeyPatch.context() as m:
        m.delenv("ROCKETRIO_PURE_PYTHON", raising=False)
        loaded = compiled.load()
        assert loaded is not None, "the extension is not built"
        if remoting_configured:
            loaded.configure_remoting(
                remoting.RemotingCommand, remoting._LANG_NAME_BY_CODE,
                remoting._LANG_CODE_BY_NAME, remoting._LANG_OTHER,
            )  # fmt: skip
        for module in modules:
            m.setattr(module, "_speedups", loaded)
        yield loaded
