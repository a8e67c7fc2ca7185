"""Every hand mutant (tests/hand_mutants.py) still names code that exists exactly once.

Running a mutant whose text moved fails loudly, but only when somebody runs it; a refactor or a
merge can leave a mutant pointing at code that is gone for weeks. This checks every anchor on
each suite run, without running the mutants."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hand_mutants import MUTANTS, Mutant, R


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name[:60])
def test_each_mutant_text_is_found_exactly_once(mutant: Mutant) -> None:
    source = (Path(R) / mutant.path).read_text()
    assert source.count(mutant.text) == 1, f"{mutant.path}: {mutant.text!r}"
    for test in mutant.tests:
        assert (Path(R) / test.split("::")[0]).exists(), test
