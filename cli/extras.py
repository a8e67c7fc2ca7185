"""Optional dependencies: the base install (`pip install rocketrio`) has the client and the
servers; Spark and gRPC come as extras. A command that needs a missing extra says how to get it
instead of failing on an ImportError."""

from __future__ import annotations

import importlib.util

# extra -> the top-level modules it installs
EXTRAS: dict[str, tuple[str, ...]] = {
    "analysis": ("pyspark",),
    "proxy": ("grpc", "google.protobuf"),
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent is missing
        return False


def missing_extra(extra: str, tool: str) -> str | None:
    """None when ``extra``'s modules are importable, else the line telling how to install it."""
    missing = [m for m in EXTRAS[extra] if not _installed(m)]
    if not missing:
        return None
    return (
        f"{tool}: needs {', '.join(missing)}, which the base install leaves out; install it with "
        f"pip install 'rocketrio[{extra}]' (from a checkout: pip install -e '.[{extra}]')"
    )
