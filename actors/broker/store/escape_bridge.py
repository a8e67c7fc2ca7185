"""The EscapeBridge protocol (RIP-32, SPEC A3): where a broker's secondary messages go while its
own store must not take them (a slave acting for its dead master: a write there would fork its
CommitLog from the master's).

One method: `put_to_live_master(msgs)` writes the messages to a live master of another broker
group and answers None once they are stored there, else why not (the caller keeps its place and
tries again later; nothing is skipped). Implemented remotely by failover/escape.py
(enableRemoteEscape) and, later, in-process by a broker container.
"""

from __future__ import annotations

from typing import Protocol

from rocketrio.storage.store_types import MessageToStore


class EscapeBridge(Protocol):
    async def put_to_live_master(self, msgs: list[MessageToStore]) -> str | None: ...
