"""A pull parked at a master that stopped answering (SIGSTOP, a frozen host, a link cut between
the client and it) is noticed here and its topic's route asked for, so the pull moves to the
new master (issue 26's stuck-request watch, for the pull consumers).

The broker holds a pull at most ``brokerSuspendMaxTimeMillis`` (15 s) before it answers; one
still unanswered `STUCK_AFTER_S` past that is stuck. `watch_stuck_pulls` looks every `POLL_S`
and asks for the route of each topic with a stuck pull (shared and rate limited by the client's
`RouteRefresher`); once the route names another address for the queue, the consumer abandons
the pull and pulls at the new one at once (`ConsumerCore._on_route`). Before this a pull parked
at a frozen master waited its whole ``consumerTimeoutMillisWhenSuspend`` (30 s), then went to
the same address again until the 30 s route poll noticed the new master: 30-60 s of nothing
consumed although the new master was in the route within ~2 s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from rocketrio.actors.client import backend as aio
from rocketrio.actors.client.pull_api import QueueState
from rocketrio.actors.client.stuck_sends import STUCK_AFTER_S

POLL_S = 0.5  # how often parked pulls are looked at (a stuck one is 15 s late already)


class _Settings(Protocol):
    brokerSuspendMaxTimeMillis: int


class _Client(Protocol):
    def request_route_refresh(self, topic: str) -> object: ...


class Pulling(Protocol):
    """A consumer as the watch sees it (`ConsumerCore`)."""

    queues: Mapping[Any, QueueState]
    settings: _Settings
    client: _Client


def stuck_topics(queues: Iterable[QueueState], now: float, hold_s: float) -> set[str]:
    """The topics of the pulls in flight unanswered `STUCK_AFTER_S` past the broker's hold."""
    late = now - hold_s - STUCK_AFTER_S
    return {st.mq.topic for st in queues if st.pull_addr is not None and st.pull_started < late}


async def watch_stuck_pulls(consumer: Pulling, poll_s: float = POLL_S) -> None:
    """Every ``poll_s``, ask for the route of each topic with a stuck pull (forever)."""
    while True:
        await aio.sleep(poll_s)
        hold_s = consumer.settings.brokerSuspendMaxTimeMillis / 1000
        for topic in stuck_topics(consumer.queues.values(), aio.current_time(), hold_s):
            consumer.client.request_route_refresh(topic)
