"""Route refreshes on demand, shared and rate limited (one NameServer query per topic at a time).

A failed send or pull, a closed broker connection or a degraded route asks for a fresh route of
a topic with `RouteRefresher.request`, which returns an event set once a query that *started
after the request* has finished. Every request made before that query starts shares it, so a
storm of hundreds of failing sends costs one query, and each requester still gets a route at
least as new as its failure (a query already running when the failure happened may predate the
new master's registration, so it does not count). Queries of one topic start at least
``min_interval_s`` apart; a query runs in the client's nursery, never in the requester's cancel
scope, so a send that gives up does not abort the query others wait for.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

import attrs

from rocketrio.actors.client import backend as aio

# upstream polls every 30 s; on demand we allow one query per topic per this interval
ROUTE_REFRESH_MIN_INTERVAL_S = 0.1

Fetch = Callable[[str], Awaitable[None]]


@attrs.define(eq=False)
class _TopicRefresh:
    # set when the next query ends; every request made since the last query started waits on it
    next_done: aio.Event = attrs.field(factory=aio.new_event)
    requested: bool = False
    running: bool = False
    last_start: float = -math.inf


class RouteRefresher:
    """Per-topic coalescing of route queries; ``fetch(topic)`` must log its own errors, not
    raise them."""

    def __init__(self, fetch: Fetch, min_interval_s: float = ROUTE_REFRESH_MIN_INTERVAL_S) -> None:
        self._fetch = fetch
        self.min_interval_s = min_interval_s
        self._topics: dict[str, _TopicRefresh] = {}
        self.queries = 0  # how many queries were started (for tests and stats)

    def request(self, topic: str, nursery: aio.TaskGroup) -> aio.Event:
        """Ask for a query of ``topic`` that starts from now on; the event is set when it ends."""
        st = self._topics.get(topic)
        if st is None:
            st = self._topics[topic] = _TopicRefresh()
        st.requested = True
        if not st.running:
            st.running = True
            nursery.start_soon(self._run, topic, st)
        return st.next_done

    def last_start(self, topic: str) -> float:
        st = self._topics.get(topic)
        return st.last_start if st is not None else -math.inf

    async def _run(self, topic: str, st: _TopicRefresh) -> None:
        try:
            while st.requested:
                # also a checkpoint: requests made in this scheduler tick join the query
                await aio.sleep_until(st.last_start + self.min_interval_s)
                st.requested = False
                done, st.next_done = st.next_done, aio.new_event()
                st.last_start = aio.current_time()
                self.queries += 1
                try:
                    await self._fetch(topic)
                finally:
                    done.set()
        finally:
            st.running = False
            if st.requested:  # cancelled (the client is stopping): release the waiters
                st.requested = False
                st.next_done.set()
                st.next_done = aio.new_event()
