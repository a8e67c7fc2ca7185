"""Fan-out of the cluster view to the connected viewers, with bounded memory per viewer.

Each `Viewer` holds only what it has not been sent yet, and of a section only the newest text:
a viewer slower than the poll simply skips intermediate versions (they are stale), so its
backlog is at most one text per section (shared with every other viewer: the hub encodes each
update once), the chart points of `POINTS` polls, the last `FEED` feed items (older ones are counted
in ``dropped``) and `REPLIES` action results. Nothing a viewer does can make the hub wait: the
hub only appends and sets the viewer's wake-up; each viewer's own sender task writes to its
socket, and gives the viewer up when a write takes longer than its send timeout.
"""

from __future__ import annotations

from collections import deque

import trio

from rocketrio.actors.console.protocol import (
    ActionResult,
    Feed,
    FeedItem,
    Hello,
    Sample,
    Samples,
    Section,
    encode,
)

POINTS = 600  # chart points kept (5 minutes at 0.5 s)
FEED = 200  # feed items kept for a viewer that has not read them yet
REPLIES = 16


class Viewer:
    """What one browser still has to be sent (see the module docstring)."""

    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.sections: dict[str, str] = {}  # name -> encoded Section, newest only
        self.points: deque[Sample] = deque(maxlen=POINTS)
        self.feed: deque[FeedItem] = deque(maxlen=FEED)
        self.dropped = 0
        self.replies: deque[str] = deque(maxlen=REPLIES)
        self.first: list[str] = []
        self._wake = trio.Event()

    def _nudge(self) -> None:
        self._wake.set()

    def offer_section(self, name: str, text: str) -> None:
        self.sections[name] = text
        self._nudge()

    def offer_point(self, point: Sample) -> None:
        self.points.append(point)
        self._nudge()

    def offer_feed_items(self, items: list[FeedItem]) -> None:
        overflow = len(self.feed) + len(items) - FEED
        if overflow > 0:
            self.dropped += overflow
        self.feed.extend(items)
        self._nudge()

    def offer_reply(self, reply: ActionResult) -> None:
        self.replies.append(encode(reply))
        self._nudge()

    def backlog(self) -> int:
        """Messages waiting (a bound: sections + 1 for points + 1 for the feed + replies)."""
        return (
            len(self.first)
            + len(self.sections)
            + (1 if self.points else 0)
            + (1 if self.feed else 0)
            + len(self.replies)
        )

    def take(self) -> list[str]:
        """Everything pending, as the texts to send in order; empties the backlog."""
        out = self.first + list(self.replies) + list(self.sections.values())
        self.first, self.sections = [], {}
        self.replies.clear()
        if self.points:
            out.append(encode(Samples(points=list(self.points))))
            self.points.clear()
        if self.feed:
            out.append(encode(Feed(items=list(self.feed), dropped=self.dropped)))
            self.feed.clear()
            self.dropped = 0
        self._wake = trio.Event()
        return out

    async def wait(self) -> None:
        await self._wake.wait()


class Hub:
    """The connected viewers, the last sections (for newcomers) and the chart history."""

    def __init__(self, hello: Hello, max_viewers: int) -> None:
        self.hello = encode(hello)
        self.max_viewers = max_viewers
        self.viewers: set[Viewer] = set()
        self._sections: dict[str, str] = {}
        self._history: deque[Sample] = deque(maxlen=POINTS)
        self._recent: deque[FeedItem] = deque(maxlen=50)

    def join(self, peer: str) -> Viewer | None:
        """A new viewer primed with the hello, every section, the chart history and recent
        feed items; None when `max_viewers` are connected already."""
        if len(self.viewers) >= self.max_viewers:
            return None
        v = Viewer(peer)
        v.first = [self.hello, *self._sections.values()]
        v.points.extend(self._history)
        v.feed.extend(self._recent)
        v._nudge()
        self.viewers.add(v)
        return v

    def leave(self, v: Viewer) -> None:
        self.viewers.discard(v)

    def publish_section(self, name: str, data: object) -> None:
        text = encode(Section(name=name, data=data))
        self._sections[name] = text
        for v in self.viewers:
            v.offer_section(name, text)

    def publish_point(self, point: Sample) -> None:
        self._history.append(point)
        for v in self.viewers:
            v.offer_point(point)

    def publish_feed_items(self, items: list[FeedItem]) -> None:
        if not items:
            return
        self._recent.extend(items)
        for v in self.viewers:
            v.offer_feed_items(items)
