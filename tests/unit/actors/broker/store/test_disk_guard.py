"""The disk guard's pure rules: upstream's clamp of diskSpaceWarningLevelRatio, full strictly
above the limit, an unknown usage is not full, the refusal is SERVICE_NOT_AVAILABLE with
upstream's remark, transitions are reported once, and chained gates answer the first refusal."""

from __future__ import annotations

from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.store.disk_guard import (
    DiskGuard,
    DiskUsage,
    FirstRefusal,
    warning_ratio,
)
from rocketrio.protocol.codes import ResponseCode


def test_warning_ratio_is_clamped_like_upstream() -> None:
    assert warning_ratio(90) == 0.90
    assert warning_ratio(95) == 0.90  # upstream never lets it above 0.90
    assert warning_ratio(10) == 0.35  # nor below 0.35
    assert warning_ratio(80) == 0.80


def test_full_above_the_limit_until_back_at_or_below() -> None:
    g = DiskGuard(80)
    assert g.write_refusal() is None  # nothing sampled yet: writable
    assert g.observe(DiskUsage(0.80, 0.80, 0.80)) is None  # at the limit: not full
    assert g.write_refusal() is None
    assert g.observe(DiskUsage(0.81, 0.5, -1.0)) is True
    refusal = g.write_refusal()
    assert refusal == Refusal(
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now. It may be caused by one of the following reasons: the "
        "broker's disk is full [CL:  0.81 CQ:  0.50 INDEX: -1.00], messages are put to the "
        "slave, message store has been shut down, etc.",
    )
    assert g.observe(DiskUsage(0.95, 0.5, 0.5)) is None  # still full: no new transition
    assert "CL:  0.95" in g.write_refusal().remark  # type: ignore[union-attr]
    assert g.observe(DiskUsage(0.79, 0.5, 0.5)) is False
    assert g.write_refusal() is None
    assert g.observe(DiskUsage(-1.0, -1.0, -1.0)) is None  # unknown: not full


def test_the_first_refusal_of_a_chain_wins() -> None:
    disk = DiskGuard(90)

    class Slave:
        def write_refusal(self) -> Refusal | None:
            return Refusal(ResponseCode.SERVICE_NOT_AVAILABLE, "slave")

    assert FirstRefusal([disk]).write_refusal() is None
    assert FirstRefusal([disk, Slave()]).write_refusal() == Refusal(14, "slave")
    disk.observe(DiskUsage(0.99, 0.99, 0.99))
    got = FirstRefusal([disk, Slave()]).write_refusal()
    assert got is not None and "disk is full" in got.remark


def test_a_store_write_on_a_full_disk_refuses_like_the_ratio_until_the_store_writes_again() -> None:
    """The store's report (a write or fsync failed with ENOSPC) makes the guard refuse with the
    same code and remark, whatever the ratio says; the guard lets writes in again only when
    the store took its report back AND the ratio allows; each transition is reported once."""
    g = DiskGuard(80)
    assert g.observe(DiskUsage(0.5, 0.5, 0.5)) is None
    assert g.store_failed("No space left on device (/store/commitlog/0)") is True
    refusal = g.write_refusal()
    assert refusal is not None and refusal.code == ResponseCode.SERVICE_NOT_AVAILABLE
    assert refusal.remark == (
        "service not available now. It may be caused by one of the following reasons: the "
        "broker's disk is full [CL:  0.50 CQ:  0.50 INDEX:  0.50; No space left on device "
        "(/store/commitlog/0)], messages are put to the slave, message store has been shut "
        "down, etc."
    )
    assert g.observe(DiskUsage(0.95, 0.5, 0.5)) is None  # full already: no new transition
    assert g.store_failed(None) is None  # the ratio still says full
    assert g.write_refusal() is not None
    assert g.observe(DiskUsage(0.5, 0.5, 0.5)) is False
    assert g.write_refusal() is None
    assert DiskGuard(80).store_failed("x") is True  # before any sample: still refused
