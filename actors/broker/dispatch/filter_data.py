"""The registered SQL92 filters of a broker and the bit-maps computed from them (upstream
ConsumerFilterManager, ConsumerFilterData and CommitLogDispatcherCalcBitMap), pure: time comes
in through ``now_ms``.

A filter is a group's SQL92 subscription of a topic, compiled once. It is registered when a
pull asks for it (`ConsumerFilterManager.get`) or when `sweep` (every second, FilterFeature)
finds it among the live groups' heartbeat subscriptions; it keeps its ``born_ms`` until its
expression changes (then it is a new filter, born again). When no live consumer of the group
subscribes to it any more, `sweep` marks it dead (``dead_ms``); it still counts at dispatch, as
upstream, and it comes back to life unchanged if the group returns. A filter dead for
``filterDataCleanTimeSpan`` (24 h) is dropped, compiled selector and all (upstream's clean());
a group returning after that registers afresh.

With ``enableCalcFilterBitMap`` the store asks `bitmap` at dispatch for each record of a topic
with filters: every filter of the topic is evaluated on the record's properties and the bloom
positions (bloom.py) of those that match are set. A pull by filter F then skips a record on its
bit-map alone when F's positions are not all set, and only if the map was computed after F was
born (`BitMapProbe`, storage/cq_ext.py): a record dispatched before F existed has no bit for F
and is read and judged. To keep that rule whatever the wall clock does, map times never go
down (each is at least the one before it) and a filter is born strictly after every map computed
so far, in this process and on disk: the last unit of each ConsumeQueue ext holds its latest
time, the store reads those at open (``calc_floor``), and no filter is born, nor map computed,
at or before the latest of them. A map's time and the filters it evaluates are taken together
(under a lock: dispatch may run in a worker thread), and a map is always timed after every
filter already born: those filters count for it even when the wall clock lags their births, and
a filter registered after it is born later, so it gets no say. Filters are not persisted (upstream
writes consumerFilter.json): after a restart every filter is born anew, so the maps of records
stored before the restart are not used.

The by-topic table is replaced, never changed in place, so dispatch may read it from a worker
thread while the Trio thread registers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

import attrs

from rocketrio.actors.broker.dispatch.bloom import BloomFilter, set_bits
from rocketrio.protocol.bodies import SubscriptionData
from rocketrio.protocol.filter import EXPRESSION_SQL92, is_tag_type
from rocketrio.protocol.message_format import decode_properties
from rocketrio.protocol.sql92_compile import compile_selector
from rocketrio.protocol.sql92_parse import Sql92ParseError, parse_sql92
from rocketrio.protocol.sql92_tree import Expr, Sql92EvalError
from rocketrio.storage.cq_ext import BitMapProbe

FILTER_DATA_CLEAN_TIME_SPAN_MS = 24 * 3600 * 1000
FilterKey = tuple[str, str]  # (topic, group)


@attrs.define(eq=False)
class ConsumerFilterData:
    """A compiled SQL92 subscription of one group on one topic (upstream's name)."""

    topic: str
    group: str
    expression: str
    client_version: int
    compiled: Expr
    born_ms: int = 0
    dead_ms: int | None = None  # when the last consumer of it left (None: alive)
    positions: tuple[int, ...] = ()  # the bloom bit positions of "<group>#<topic>"
    judge: Callable[[object], object] | None = None

    @property
    def is_dead(self) -> bool:
        return self.dead_ms is not None


def build_filter_data(topic: str, group: str, sub: SubscriptionData) -> ConsumerFilterData | None:
    """Upstream ConsumerFilterManager.build: None when the expression does not compile."""
    if sub.expressionType.upper() != EXPRESSION_SQL92:
        return None
    try:
        compiled = parse_sql92(sub.subString)
    except Sql92ParseError:
        return None
    return ConsumerFilterData(topic, group, sub.subString, sub.subVersion, compiled)


def _is_sql(sub: SubscriptionData | None) -> bool:
    return sub is not None and not is_tag_type(sub.expressionType) and bool(sub.subString)


class ConsumerFilterManager:
    """The registered filters (module docstring). ``subscription(group, topic)`` looks up what
    a live group subscribes to, ``live()`` lists every live (group, subscription)."""

    def __init__(
        self,
        subscription: Callable[[str, str], SubscriptionData | None],
        *,
        live: Callable[[], Iterable[tuple[str, SubscriptionData]]] = lambda: (),
        bloom: BloomFilter | None = None,
        now_ms: Callable[[], int] = lambda: 0,
        clean_span_ms: int = FILTER_DATA_CLEAN_TIME_SPAN_MS,
        calc_floor: Callable[[], int] = lambda: -1,
    ) -> None:
        """``calc_floor()``: the latest time a bit-map on disk was computed (the store's, at
        its open): no filter is born, and no map computed, at or before it."""
        self._subscription = subscription
        self._live = live
        self.bloom = bloom or BloomFilter.create_by_fn(20, 32)
        self._now_ms = now_ms
        self._calc_floor = calc_floor
        self.clean_span_ms = clean_span_ms
        self._data: dict[FilterKey, ConsumerFilterData] = {}
        self._by_topic: dict[str, tuple[ConsumerFilterData, ...]] = {}
        self._last_calc_ms = -1  # the latest bit-map time handed out
        self._last_born_ms = -1  # the latest birth
        # births and map times are decided under it (dispatch may run in a worker thread)
        self._clock_lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def get(self, topic: str, group: str) -> ConsumerFilterData | None:
        """The filter of the group's heartbeat subscription of ``topic`` (registered now if
        new or changed); None when the group subscribes no SQL92 expression there or it does
        not compile."""
        sub = self._subscription(group, topic)
        if sub is None or not _is_sql(sub):
            return None
        return self.register(topic, group, sub)

    def registered(self, topic: str, group: str) -> ConsumerFilterData | None:
        """The filter registered for (topic, group), alive or dead, without a lookup."""
        return self._data.get((topic, group))

    def register(self, topic: str, group: str, sub: SubscriptionData) -> ConsumerFilterData | None:
        """Upstream FilterDataMapByTopic.register: the same expression keeps its filter (a newer
        subVersion is noted, a dead one lives again); another one replaces it, born now; one
        that does not compile removes it."""
        key = (topic, group)
        old = self._data.get(key)
        if old is not None and old.expression == sub.subString:
            old.client_version = max(old.client_version, sub.subVersion)
            old.dead_ms = None
            return old
        data = build_filter_data(topic, group, sub)
        if data is None:
            if self._data.pop(key, None) is not None:
                self._index(topic)
            return None
        data.positions = self.bloom.positions_of(group, topic)
        data.judge = compile_selector(data.compiled)
        with self._clock_lock:  # born after every map made, and in the table before the next
            data.born_ms = max(self._now_ms(), self._last_calc_ms + 1, self._calc_floor() + 1)
            self._last_born_ms = max(self._last_born_ms, data.born_ms)
            self._data[key] = data
            self._index(topic)
        return data

    def _index(self, topic: str) -> None:
        datas = tuple(d for (t, _), d in self._data.items() if t == topic)
        if datas:
            self._by_topic = {**self._by_topic, topic: datas}
        else:
            self._by_topic = {t: d for t, d in self._by_topic.items() if t != topic}

    def sweep(self) -> int:
        """Register the live groups' SQL92 subscriptions, mark dead the filters no live group
        holds, drop the ones dead for ``clean_span_ms``; returns how many were dropped."""
        now = self._now_ms()
        live: set[FilterKey] = set()
        for group, sub in list(self._live()):
            if _is_sql(sub) and self.register(sub.topic, group, sub) is not None:
                live.add((sub.topic, group))
        expired = []
        for key, data in self._data.items():
            if key in live:
                continue
            if data.dead_ms is None:
                data.dead_ms = now
            elif now - data.dead_ms >= self.clean_span_ms:
                expired.append(key)
        for key in expired:
            del self._data[key]
        for topic in {t for t, _ in expired}:
            self._index(topic)
        return len(expired)

    # ------------------------------------------------------------------ the bit-map

    def probe(self, data: ConsumerFilterData) -> BitMapProbe:
        """What a read by ``data`` asks of the ConsumeQueue ext."""
        born = max(data.born_ms, self._calc_floor())  # maps of an earlier run know nothing of it
        return BitMapProbe(data.topic, data.positions, born, self.bloom.m)

    def wants(self, topic: str) -> bool:
        return topic in self._by_topic

    def bitmap(self, topic: str, properties: bytes) -> tuple[int, bytes] | None:
        """(when, bit-map) of one record: the positions of every filter of ``topic`` that
        matches its properties (upstream CommitLogDispatcherCalcBitMap; a filter that fails to
        evaluate does not match)."""
        with self._clock_lock:  # the time, then the filters (module docstring)
            now = max(
                self._now_ms(), self._last_calc_ms, self._calc_floor(), self._last_born_ms + 1
            )
            self._last_calc_ms = now
            datas = self._by_topic.get(topic)
        if not datas:
            return None
        props = decode_properties(properties.decode("utf-8", "replace"))
        bits = bytearray(self.bloom.byte_length)
        for data in datas:
            judge = data.judge
            try:
                if judge is not None and judge(props) is True:
                    set_bits(bits, data.positions)
            except Sql92EvalError:
                continue
        return now, bytes(bits)
