"""The API reference is generated from the docstrings (docs/api/build.py, pdoc) and documents
every public name of `rocketrio.client`."""

from __future__ import annotations

import runpy
import warnings
from pathlib import Path

import rocketrio.client as client
from tests.harness.paths import REPO


def test_the_reference_builds_and_has_a_section_per_public_name(tmp_path: Path) -> None:
    build = runpy.run_path(str(REPO / "docs" / "api" / "build.py"))["build"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pdoc warns about unresolved forward annotations
        page = build(tmp_path)
    html = page.read_text()
    missing = [name for name in client.__all__ if f'id="{name}"' not in html]
    assert missing == []
    assert "Runs on asyncio or Trio" in html  # docstrings are rendered, not just names
