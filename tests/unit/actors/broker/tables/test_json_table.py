"""The one file base of the broker's tables (actors/broker/tables/json_table.py): a table with
two files reads both and adopts them together, a file read from its .bak is logged once, and
`persist` writes every file durably."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import structlog

from rocketrio.actors.broker.tables.config_file import ConfigFile
from rocketrio.actors.broker.tables.json_table import JsonFileTable
from tests.harness.blocking import inline_blocking


@attrs.define
class Names:
    names: list[str] = attrs.Factory(list)


class TwoFiles(JsonFileTable):
    def __init__(self, root: Path) -> None:
        self.log = structlog.get_logger("test")
        self.a, self.b = Names(), Names()
        self.adopted: list[tuple[Any, ...]] = []
        self.file_a = ConfigFile(str(root / "a.json"), Names, lambda: self.a, inline_blocking)
        self.file_b = ConfigFile(str(root / "b.json"), Names, lambda: self.b, inline_blocking)

    def files(self) -> tuple[ConfigFile[Any], ...]:
        return (self.file_a, self.file_b)

    def _adopt_files(self, values: tuple[Any, ...]) -> None:
        self.adopted.append(values)
        self.a = values[0] or Names()
        self.b = values[1] or Names()


async def test_both_files_are_written_then_read_back_together(tmp_path: Path) -> None:
    t = TwoFiles(tmp_path)
    assert not await t.load_file()  # no files yet: adopted as empty
    assert t.adopted == [(None, None)]
    t.a.names.append("x")
    t.b.names.append("y")
    await t.persist()
    assert json.loads((tmp_path / "a.json").read_text())["names"] == ["x"]
    again = TwoFiles(tmp_path)
    assert not await again.load_file()
    assert (again.a.names, again.b.names) == (["x"], ["y"])


async def test_a_file_read_from_its_backup_is_logged_once(tmp_path: Path) -> None:
    t = TwoFiles(tmp_path)
    t.a.names.append("first")
    await t.persist()
    t.a.names.append("second")
    await t.persist()  # a.json.bak now holds ["first"]
    (tmp_path / "a.json").write_text("{damaged")
    again = TwoFiles(tmp_path)
    with structlog.testing.capture_logs() as logs:
        assert await again.load_file()
    assert again.a.names == ["first"] and again.b.names == []
    backed = [e for e in logs if e["event"] == "config_loaded_from_backup"]
    assert [e["file"] for e in backed] == [str(tmp_path / "a.json")]
