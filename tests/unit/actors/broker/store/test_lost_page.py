"""The lost-page decisions (actors/broker/store/lost_page.py): what start-up does with a record
lost under valid records, per role mode, and what a fenced broker makes of the controller's
view."""

from __future__ import annotations

import pytest

from rocketrio.actors.broker.store.lost_page import (
    FenceLifted,
    FollowMaster,
    Quarantine,
    Refuse,
    RoleMode,
    StayOut,
    fenced_verdict,
    on_lost_record,
    role_mode,
)
from rocketrio.storage.catch_up_fence import CatchUpFence

FENCE = CatchUpFence(lost_offset=4096, old_end=9000, epoch=3, quarantine="/s/quarantine/q")


@pytest.mark.parametrize(
    ("controller", "slave", "mode"),
    [
        (True, False, RoleMode.CONTROLLER),
        (True, True, RoleMode.CONTROLLER),
        (False, True, RoleMode.CLASSIC_SLAVE),
        (False, False, RoleMode.CLASSIC_MASTER),
    ],
)
def test_role_mode(controller: bool, slave: bool, mode: RoleMode) -> None:
    assert role_mode(controller_mode=controller, slave=slave) is mode


def test_a_replica_quarantines_and_a_controller_mode_broker_is_fenced() -> None:
    assert on_lost_record(RoleMode.CONTROLLER, 4096, 5000) == Quarantine(4096, 5000, fence=True)
    assert on_lost_record(RoleMode.CLASSIC_SLAVE, 4096, 5000) == Quarantine(4096, 5000, fence=False)


def test_a_classic_master_still_refuses_for_an_operator() -> None:
    decision = on_lost_record(RoleMode.CLASSIC_MASTER, 4096, 5000)
    assert isinstance(decision, Refuse) and "operator" in decision.reason


def test_nothing_to_quarantine_is_refused() -> None:
    assert isinstance(on_lost_record(RoleMode.CONTROLLER, 5000, 5000), Refuse)


def test_no_master_means_stay_out_and_say_why() -> None:
    verdict = fenced_verdict(FENCE, 2, None, 4, [2])
    assert isinstance(verdict, StayOut)
    assert "no master" in verdict.reason and "/s/quarantine/q" in verdict.reason


@pytest.mark.parametrize("epoch", [3, 4, 9])
def test_named_master_while_fenced_is_refused(epoch: int) -> None:
    verdict = fenced_verdict(FENCE, 2, 2, epoch, [2])
    assert isinstance(verdict, StayOut) and "refuses the role" in verdict.reason


def test_another_master_is_followed_until_its_sync_state_set_lists_us() -> None:
    assert fenced_verdict(FENCE, 2, 1, 4, [1]) == FollowMaster(1)
    assert fenced_verdict(FENCE, 2, 1, 4, None) == FollowMaster(1)
    assert fenced_verdict(FENCE, 2, 1, 4, [1, 2]) == FenceLifted(1, 4)


def test_the_sync_state_set_of_the_epoch_before_the_cut_lifts_nothing() -> None:
    # at epoch 3 this broker (or a set it was in before the cut) was listed: proves nothing
    assert fenced_verdict(FENCE, 2, 1, 3, [1, 2]) == FollowMaster(1)
    assert fenced_verdict(FENCE, 2, 1, 2, [1, 2]) == FollowMaster(1)
