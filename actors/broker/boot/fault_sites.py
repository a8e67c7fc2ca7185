"""Named fault sites of the broker (FoundationDB's `buggify` idea): hooks awaited at the points
where a crash matters, so a test can kill the broker exactly there and check recovery.

Production code awaits `faults.reach(site)` with `NO_FAULTS`, which does nothing. Tests pass an
object with the same `reach` method (crash the broker, hold it, count arrivals ...). Site names
are constants here, one per step, so a test names the step it breaks, not a line of code.
"""

from __future__ import annotations

from typing import Final, Protocol


class Fault:
    """Crash points of the persistent-BrokerId flow (actors/broker/roles/replicas_manager.py)."""

    NEXT_BROKER_ID_RECEIVED: Final = "next_broker_id_received"  # temp file not written yet
    TEMP_WRITTEN: Final = "temp_meta_written"  # .broker.meta.temp durable, apply not sent
    APPLY_ANSWERED: Final = "apply_broker_id_answered"  # accepted, broker.meta not written
    META_COMMITTED: Final = "broker_meta_committed"  # broker.meta durable, not registered
    REGISTERED: Final = "registered_to_controller"  # register answered, role not taken
    ALL: Final = (
        NEXT_BROKER_ID_RECEIVED,
        TEMP_WRITTEN,
        APPLY_ANSWERED,
        META_COMMITTED,
        REGISTERED,
    )


class FaultSites(Protocol):
    """Awaited at every named site; production does nothing."""

    async def reach(self, site: str) -> None: ...


class NoFaults:
    async def reach(self, site: str) -> None:
        return None


NO_FAULTS: Final = NoFaults()
