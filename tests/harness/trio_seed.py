"""Replayable task order for the seeded simulations (Trio's private scheduling hook)."""

from __future__ import annotations


def seed_trio_scheduler(seed: int) -> None:
    """Make Trio's task order replayable for a seeded simulation.

    Trio breaks ties between runnable tasks with a private PRNG, shuffled deterministically when
    Hypothesis' Trio plugin is loaded (it is: hypothesis is a test dependency). Seeding it, with
    MockClock and a seeded SimNetwork, makes a failing seed replay the same schedule. This is
    private Trio API, hence the pinned trio range in pyproject.toml and
    tests/unit/harness/test_trio_seed.py, which fails if the hook moves.
    """
    import hypothesis  # noqa: F401  (loads the plugin that turns deterministic scheduling on)
    from trio._core import _run

    _run._r.seed(seed)
