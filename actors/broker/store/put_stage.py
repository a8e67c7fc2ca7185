"""Single puts that share one inbox slot of the store actor (actor.py `put_nowait`).

The sends of one read arrive back to back; one inbox message per send cost a channel send and
receive each. A `PutStage` keeps the newest inbox message's list of staged puts while the actor
has not taken it: a put joins it, so a read's sends reach the actor as one message and one
turn takes them in order. Any other message sealed the stage when it was sent (a put after it
must not be taken before it), and the actor seals it when it takes its inbox. Bounded: at most
``per_slot`` puts per message and ``max_extra`` waiting beyond one per inbox slot, so the
inbox holds at most capacity + max_extra puts. Pure: no trio, no store.
"""

from __future__ import annotations

from rocketrio.actors.broker.store.messages import PutMessages, StagedPuts

STAGE_MAX = 256  # single puts on one inbox slot


class PutStage:
    def __init__(self, per_slot: int, max_extra: int) -> None:
        self.per_slot = per_slot
        self.max_extra = max_extra
        self.extra = 0  # staged puts waiting beyond one per inbox message
        self._open: list[PutMessages] | None = None

    def join(self, put: PutMessages) -> bool:
        """Add ``put`` to the open stage; False when there is none or it is full (then the
        caller sends `opened` of it, and `opened` it once the inbox took it)."""
        staged = self._open
        if staged is None or len(staged) >= self.per_slot or self.extra >= self.max_extra:
            return False
        staged.append(put)
        self.extra += 1
        return True

    def opened(self, token: StagedPuts) -> None:
        """``token`` is now the newest inbox message: later puts may join it."""
        self._open = token.puts

    def seal(self) -> None:
        """Another message went into the inbox, or the actor took it: no more joins."""
        self._open = None

    def taken(self, token: StagedPuts) -> None:
        """The actor took ``token`` from its inbox (after `seal`)."""
        self.extra -= len(token.puts) - 1
