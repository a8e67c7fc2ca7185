"""The client is backend-neutral: its modules reach the event loop only through
``actors/client/backend.py`` (anyio), never by importing ``trio`` or ``asyncio`` themselves.

Read with `ast` (top-level imports, imports inside functions and ``TYPE_CHECKING`` blocks), so a
client module merged later that imports Trio directly fails here; convert it to
``from rocketrio.actors.client import backend as aio`` (docs/clients.md says how).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.harness.paths import REPO

LOOP_LIBRARIES = ("trio", "asyncio", "trio_websocket", "sniffio")
# the one door: only here may the loops' own APIs be used
DOOR = REPO / "actors" / "client" / "backend.py"
# the admin API behind `rocketrio admin` runs inside Trio tools and servers (kernel RemotingClient)
CLIENT_DIRS = (REPO / "actors" / "client", REPO / "client")


def loop_imports(path: Path, root: Path = REPO) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            if name.split(".")[0] in LOOP_LIBRARIES:
                found.append(f"{path.relative_to(root)}:{node.lineno}: import {name}")
    return found


def client_modules() -> list[Path]:
    return sorted(p for d in CLIENT_DIRS for p in d.rglob("*.py") if p != DOOR)


def test_client_modules_do_not_import_an_event_loop_directly() -> None:
    modules = client_modules()
    assert len(modules) > 30  # the client's modules were found
    offenders = [line for p in modules for line in loop_imports(p)]
    assert offenders == [], "use rocketrio.actors.client.backend instead:\n" + "\n".join(offenders)


def test_the_rule_catches_direct_loop_imports(tmp_path: Path) -> None:
    assert loop_imports(DOOR)  # the door itself imports the loops (so it must be exempt)
    bad = tmp_path / "bad.py"
    bad.write_text("import anyio\ndef f():\n    import trio\n    from asyncio import sleep\n")
    assert loop_imports(bad, tmp_path) == ["bad.py:3: import trio", "bad.py:4: import asyncio"]
