"""Mutants of slave acting master (RIP-32) for the acting scenarios of the cluster simulation
(test_acting_scenarios.py): each breaks one rule the scenarios check, as a monkeypatch applied
only inside the run (mutants.py registers them with the others; ``applied(name)``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rocketrio.actors.broker.failover import lock_quorum
from rocketrio.actors.broker.failover.acting_core import ActingCore
from rocketrio.actors.broker.failover.escape import LocalEscape, RemoteEscape
from rocketrio.actors.broker.failover.pop_escape import PopEscaper
from rocketrio.actors.broker.pop.revive_service import PopReviveService
from rocketrio.actors.broker.roles.classic import ClassicRoleService
from rocketrio.actors.broker.schedule.service import ScheduleService
from rocketrio.protocol.message_format import PROPERTY_TRANSACTION_PREPARED, decode_properties
from rocketrio.storage.store_types import MessageToStore

Patch = Callable[[Any, str, Any], None]


def _slave_never_acts(patch: Patch) -> None:
    patch(ActingCore, "acting", property(lambda self: False))  # MUTANT


def _due_message_skipped(patch: Patch) -> None:
    real = ScheduleService._reput

    async def _reput(self: ScheduleService, *args: Any) -> bool:
        ok = await real(self, *args)
        # MUTANT: a failed escape counts as delivered, so the offset moves on (upstream #9249)
        return ok or self.escape() is not None

    patch(ScheduleService, "_reput", _reput)


def _half_skipped(patch: Patch) -> None:
    for cls in (LocalEscape, RemoteEscape):
        real = cls.put_to_live_master

        async def put(self: Any, msgs: list[MessageToStore], real: Any = real) -> str | None:
            error = await real(self, msgs)
            if error is not None and any(_prepared(m) for m in msgs):
                return None  # MUTANT: a half whose escape failed is taken as handed on
            return error

        patch(cls, "put_to_live_master", put)


def _prepared(m: MessageToStore) -> bool:
    props = m.properties
    if isinstance(props, str):
        props = decode_properties(props)
    return props.get(PROPERTY_TRANSACTION_PREPARED) == "true"


def _ack_not_applied(patch: Patch) -> None:
    # MUTANT: an ACK sent to the acting slave is answered but not applied to the revive rounds
    patch(PopReviveService, "apply_ack", lambda self, revive_qid, ack: True)


def _pop_ack_not_escaped(patch: Patch) -> None:
    def submit(self: PopEscaper, key: Any, msgs: Any, on_stored: Any, **kw: Any) -> str | None:
        on_stored()  # MUTANT: the ACK is answered but never written to the pinned master
        return None

    patch(PopEscaper, "submit", submit)


def _master_skips_pre_online(patch: Patch) -> None:
    real = ClassicRoleService.__init__

    def __init__(self: ClassicRoleService, deps: Any) -> None:
        real(self, deps)
        if self.serving_as_master():
            self.isolated = False  # MUTANT: a returning master registers at once

    patch(ClassicRoleService, "__init__", __init__)


def _strict_locks_off(patch: Patch) -> None:
    # MUTANT: lockInStrictMode ignored (one member's lock counts; upstream's default)
    patch(lock_quorum, "strict", lambda config, only_this_broker: False)


ACTING_MUTANTS: tuple[tuple[str, str, Callable[[Patch], None]], ...] = (
    ("acting_slave_never_acts", "a masterless group's slave never acts as master",
     _slave_never_acts),
    ("acting_due_message_skipped_after_failed_escape",
     "a due delay/timer message whose escape failed is skipped (upstream #9249)",
     _due_message_skipped),
    ("acting_half_skipped_after_failed_escape",
     "an unresolved half whose escape failed is taken as handed on (upstream's 10-failure "
     "skip)", _half_skipped),
    ("acting_ack_not_applied",
     "an ACK sent to the acting slave is answered but not applied (the message is revived)",
     _ack_not_applied),
    ("acting_pop_ack_not_escaped",
     "an ACK of a message popped on the acting slave is answered but never written to the "
     "master its CK is pinned to (the message is revived)", _pop_ack_not_escaped),
    ("acting_master_skips_pre_online",
     "a returning master registers at once, with its old offsets (no pre-online)",
     _master_skips_pre_online),
    ("acting_strict_locks_off",
     "lockInStrictMode is ignored: one member's queue lock counts", _strict_locks_off),
)  # fmt: skip
