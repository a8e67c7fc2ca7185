"""The Telemetry streams the proxy holds open, by client: what each client said in its settings
(client type, published topics) and how to push a command down its stream. Pure bookkeeping:
the pushing itself is the bridge's (`StreamPush`), the choice here.

Upstream's proxy sends a RecoverOrphanedTransactionCommand (a broker's transaction check) to one
producer client publishing the half message's topic; `producer_for` picks it, round robin.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import attrs

from rocketrio.protocol.grpc_v2 import definition_pb2 as pb

Push = Callable[[object], bool]  # offer a TelemetryCommand; False when the stream is gone


@attrs.define
class TelemetryStream:
    client_id: str
    push: Push
    client_type: int = pb.CLIENT_TYPE_UNSPECIFIED
    topics: frozenset[str] = frozenset()


class TelemetryRegistry:
    def __init__(self) -> None:
        self.streams: dict[str, TelemetryStream] = {}
        self._turn = itertools.count()

    def update(self, client_id: str, push: Push, settings: pb.Settings) -> None:
        """A settings command on a client's stream (a newer stream replaces an older one)."""
        topics: frozenset[str] = frozenset()
        if settings.WhichOneof("pub_sub") == "publishing":
            topics = frozenset(t.name for t in settings.publishing.topics)
        self.streams[client_id] = TelemetryStream(client_id, push, settings.client_type, topics)

    def closed(self, push: Push) -> None:
        """The stream of ``push`` ended: forget it (not a newer stream of the same client)."""
        for cid in [c for c, s in self.streams.items() if s.push is push]:
            del self.streams[cid]

    def forget(self, client_id: str) -> None:
        self.streams.pop(client_id, None)

    def producer_for(self, topic: str) -> TelemetryStream | None:
        """A producer stream that publishes ``topic``, round robin; None when there is none."""
        producers = sorted(
            (
                s
                for s in self.streams.values()
                if s.client_type == pb.PRODUCER and topic in s.topics
            ),
            key=lambda s: s.client_id,
        )
        if not producers:
            return None
        return producers[next(self._turn) % len(producers)]
