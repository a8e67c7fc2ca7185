"""The EscapeBridge protocol (RIP-32, SPEC A3): where a broker's secondary messages go while its
own store must not take them (a slave acting for its dead master: a write there would fork its
CommitLog from the master's).

One method: `put_to_live_master(msgs)` writes the messages to a live master of another broker
group and answers None once they are stored there, else why not (the caller keeps its place and
tries again later; nothing is skipped). Implemented remotely by failover/escape.py
(enableRemoteEscape) and in-process by a broker container.

`PopRecordEscape` is the POP side: the CK / ACK records of pops served by an acting slave.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from rocketrio.protocol.pop_checkpoint import MergeKey
from rocketrio.storage.store_types import MessageToStore

# a pinned master's read of a message another group's acting slave popped: (brokerName, topic,
# queueId, offset, maxBytes) -> that group's stored record (empty: gone); raises
# QueueReadUnavailable when that group could not be asked (failover/pop_escape.py)
ForeignRead = Callable[[str, str, int, int, int], Awaitable[list[bytes]]]


class EscapeBridge(Protocol):
    async def put_to_live_master(self, msgs: list[MessageToStore]) -> str | None: ...


class PopRecordEscape(Protocol):
    """Where a slave acting for its dead master writes its POP records (failover/pop_escape.py):
    every record of one CK (merge key) to one pinned master of another group, so they cancel."""

    async def put_ck(self, key: MergeKey, num: int, msg: MessageToStore) -> str | None:
        """A new CK of ``num`` messages: pinned and written now (one try); None once stored."""
        ...

    def submit(
        self,
        key: MergeKey,
        msgs: list[MessageToStore],
        on_stored: Callable[[], None],
        *,
        acked: int,
        new_key: MergeKey | None = None,
    ) -> str | None:
        """ACK (``acked`` messages of ``key``) or CHANGE_INVISIBLE_TIME records (then
        ``new_key`` is the new CK, pinned with the old one): written to ``key``'s master in the
        background, retried until stored, then ``on_stored``; an error now when no more can be
        queued."""
        ...
