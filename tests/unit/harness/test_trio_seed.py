"""Trio's private scheduling hook that the seeded simulations rely on is still there."""

from __future__ import annotations

import hypothesis  # noqa: F401  (its Trio plugin enables deterministic scheduling)
import trio
from trio._core import _run

from tests.harness.trio_seed import seed_trio_scheduler


def test_trio_has_the_deterministic_scheduling_hook() -> None:
    assert _run._ALLOW_DETERMINISTIC_SCHEDULING is True
    assert hasattr(_run._r, "seed") and hasattr(_run._r, "shuffle")


def _order(seed: int) -> list[int]:
    order: list[int] = []

    async def main() -> None:
        async def worker(i: int) -> None:
            for _ in range(3):
                await trio.lowlevel.checkpoint()
                order.append(i)

        async with trio.open_nursery() as n:
            for i in range(8):
                n.start_soon(worker, i)

    seed_trio_scheduler(seed)
    trio.run(main)
    return order


def test_a_seed_gives_the_same_task_order_and_seeds_differ() -> None:
    assert _order(1) == _order(1)
    assert any(_order(1) != _order(s) for s in range(2, 6))
