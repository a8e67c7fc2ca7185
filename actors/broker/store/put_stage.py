"""Single puts that share one inbox slot of the store actor (actor.py `put_nowait`).

The sends of one read arrive back to back; one inbox message per send cost a channel send and
receive each. A `PutStage` keeps the newest inbox message's list of staged puts while the actor
has not taken it: a put joins it, so a read's sends reach the actor as one message and one
turn takes them in order. Any other message sealed the stage when it was sent (a put after it
must not be taken before it), and the actor seals it when it takes its inbox. Bounded: at most
``per_slot`` puts and ``per_slot_bytes`` of bodies per message (a put bigger than that has a
slot of its own), and ``max_extra`` waiting beyond one per inbox slot, so the inbox holds at
most capacity + max_extra puts. The byte bound keeps a slot within a replicated master's turn
budget (replication_state.py `drain` cannot split a slot). Pure: no trio, no store.
"""

from __future__ import annotations

from rocketrio.actors.broker.store.messages import PutMessages, StagedPuts

STAGE_MAX = 256  # single puts on one inbox slot
STAGE_MAX_BYTES = 64 * 1024  # their bodies, at most (a quarter of REPLICATED_TURN_BYTES)


def _bytes(put: PutMessages) -> int:
    msgs = put.messages
    if len(msgs) == 1:  # a single send (the hot path): no generator per put
        return len(msgs[0].body)
    return sum(len(m.body) for m in msgs)


class PutStage:
    def __init__(
        self, per_slot: int, max_extra: int, per_slot_bytes: int = STAGE_MAX_BYTES
    ) -> None:
        self.per_slot = per_slot
        self.per_slot_bytes = per_slot_bytes
        self.max_extra = max_extra
        self.extra = 0  # staged puts waiting beyond one per inbox message
        self._open: list[PutMessages] | None = None
        self._open_bytes = 0

    def join(self, put: PutMessages) -> bool:
        """Add ``put`` to the open stage; False when there is none or it is full (then the
        caller sends `opened` of it, and `opened` it once the inbox took it)."""
        staged = self._open
        if staged is None or len(staged) >= self.per_slot or self.extra >= self.max_extra:
            return False
        msgs = put.messages  # a single send's body size inline (the hot path: no call)
        size = len(msgs[0].body) if len(msgs) == 1 else _bytes(put)
        if self._open_bytes + size > self.per_slot_bytes:
            return False
        staged.append(put)
        self._open_bytes += size
        self.extra += 1
        return True

    def opened(self, token: StagedPuts) -> None:
        """``token`` is now the newest inbox message: later puts may join it."""
        self._open = token.puts
        puts = token.puts
        self._open_bytes = _bytes(puts[0]) if len(puts) == 1 else sum(_bytes(p) for p in puts)

    def seal(self) -> None:
        """Another message went into the inbox, or the actor took it: no more joins."""
        self._open = None

    def taken(self, token: StagedPuts) -> None:
        """The actor took ``token`` from its inbox (after `seal`)."""
        self.extra -= len(token.puts) - 1
