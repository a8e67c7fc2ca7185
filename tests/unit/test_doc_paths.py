"""The README and docs/ point only at what exists (tests/harness/doc_paths.py): every test path
and ``::name``, product path and local link of the feature table and the docs resolves."""

from __future__ import annotations

from pathlib import Path

from tests.harness.doc_paths import doc_problems
from tests.harness.paths import REPO


def test_every_path_and_link_in_the_readme_and_docs_resolves() -> None:
    problems, checked = doc_problems(REPO)
    assert not problems, "\n".join(problems)
    # the feature table alone names hundreds of test paths: a check that found none is broken
    assert checked["files"] > 300 and checked["nodes"] > 100 and checked["links"] > 20, checked


def test_a_moved_test_is_reported(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    (tmp_path / "tests" / "unit" / "test_a.py").write_text("def test_here() -> None: ...\n")
    (tmp_path / "README.md").write_text(
        "| x | works | unit/test_a.py::test_here, ::test_gone, unit/test_b.py |\n"
        "[docs](docs/missing.md)\n"
    )
    problems, _ = doc_problems(tmp_path)
    assert len(problems) == 3, problems
    assert any("test_gone" in p for p in problems)
    assert any("missing tests/unit/test_b.py" in p or "test_b.py" in p for p in problems)
    assert any("docs/missing.md" in p for p in problems)
