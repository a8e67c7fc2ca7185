"""``rocketmq_rpc_latency``: how long a server took to answer each request, as upstream's remoting
layer measures it (RemotingMetricsConstant / RemotingMetricsManager), for every role.

Upstream's facts: a histogram in milliseconds (the elapsed time truncated to whole ms) with the
bucket bounds 1, 3, 5, 7, 10, 100, 1000, 2000 and 3000 ms; labels ``protocol_type`` (always
``remoting``), ``request_code`` and ``response_code`` (the codes' names in lower case, the number
when a code has no name), ``is_long_polling`` (the request was suspended before its answer) and
``result`` (``oneway`` for a oneway request, else ``success``; ``write_channel_failed`` when the
connection was closed before the answer could be queued), plus the node labels of the server.
Upstream records it on brokers only; we record it on the NameServer and the controller too.

`RpcLatency` is the pure part the remoting layer feeds (actors/kernel/remoting.py): plain int
counts per
(request code, response code, outcome), no lock and no prometheus_client object on the path of a
request, which costs a dict lookup and two additions. `RpcLatencyCollector` turns the counts of
one or more servers of a process (a NameServer and its embedded controller share one endpoint)
into one ``HistogramMetricFamily`` when Prometheus scrapes.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Iterable, Iterator, Mapping, Sequence

import attrs
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from rocketrio.protocol.codes import RequestCode, ResponseCode

NAME = "rocketmq_rpc_latency"
# RemotingMetricsManager.getMetricsView: the rpcCostTimeBuckets, in ms
BUCKETS_MS: tuple[int, ...] = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
_BOUNDS = (*(floatToGoString(b) for b in BUCKETS_MS), "+Inf")
PROTOCOL_TYPE_REMOTING = "remoting"
LABELS = ("protocol_type", "request_code", "response_code", "is_long_polling", "result")
# the requests a broker suspends (PullRequestHoldService) when there is nothing to read yet
LONG_POLLING_CODES = frozenset({int(RequestCode.PULL_MESSAGE), int(RequestCode.LITE_PULL_MESSAGE)})


class Outcome(enum.IntEnum):
    """How an answer left (upstream's ``result`` label, and ``is_long_polling``)."""

    SUCCESS = 0
    LONG_POLLING = 1  # success, answered after the request was suspended
    ONEWAY = 2
    WRITE_CHANNEL_FAILED = 3


_OUTCOME_LABELS: dict[Outcome, tuple[str, str]] = {
    Outcome.SUCCESS: ("false", "success"),
    Outcome.LONG_POLLING: ("true", "success"),
    Outcome.ONEWAY: ("false", "oneway"),
    Outcome.WRITE_CHANNEL_FAILED: ("false", "write_channel_failed"),
}


def code_desc(code: int, names: type[enum.IntEnum]) -> str:
    """upstream RemotingHelper.getRequestCodeDesc / getResponseCodeDesc: the lower-case name."""
    try:
        return names(code).name.lower()
    except ValueError:
        return str(code)


@attrs.frozen(slots=True)
class Series:
    """One label combination's histogram: ``buckets[i]`` counts answers of at most
    ``BUCKETS_MS[i]`` ms (not cumulative), the last one those above every bound."""

    request_code: int
    response_code: int
    outcome: Outcome
    buckets: tuple[int, ...]
    sum_ms: int

    @property
    def count(self) -> int:
        return sum(self.buckets)


class RpcLatency:
    """Answer counts by (request code, response code, outcome) and whole-ms bucket."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        # key -> [count per bucket ..., count above the last bound, sum of ms]
        self._counts: dict[tuple[int, int, int], list[int]] = {}

    def observe(
        self, request_code: int, response_code: int, outcome: int, elapsed_s: float
    ) -> None:
        """One answer that took ``elapsed_s`` seconds (truncated to whole ms, as upstream)."""
        ms = int(elapsed_s * 1000)
        key = (request_code, response_code, outcome)
        row = self._counts.get(key)
        if row is None:
            row = self._counts[key] = [0] * (len(BUCKETS_MS) + 2)
        row[bisect.bisect_left(BUCKETS_MS, ms)] += 1
        row[-1] += ms

    def observe_all(self, keys: Iterable[tuple[int, int, int]], elapsed_s: float) -> None:
        """Several answers that took the same time (the inline answers of one read): the bucket
        is found once."""
        ms = int(elapsed_s * 1000)
        i = bisect.bisect_left(BUCKETS_MS, ms)
        counts = self._counts
        for key in keys:
            row = counts.get(key)
            if row is None:
                row = counts[key] = [0] * (len(BUCKETS_MS) + 2)
            row[i] += 1
            row[-1] += ms

    def series(self) -> list[Series]:
        return [
            Series(req, resp, Outcome(outcome), tuple(row[:-1]), row[-1])
            for (req, resp, outcome), row in list(self._counts.items())
        ]


def histogram_family(
    sources: Sequence[tuple[Mapping[str, str], RpcLatency]],
) -> HistogramMetricFamily:
    """``rocketmq_rpc_latency`` of every (node labels, counts) source; the sources must share
    their label names (they are one family)."""
    node_names = list(sources[0][0]) if sources else []
    family = HistogramMetricFamily(
        NAME, "Rpc latency in milliseconds.", labels=[*node_names, *LABELS]
    )
    for node, latency in sources:
        if list(node) != node_names:
            raise ValueError(f"node labels differ: {list(node)} vs {node_names}")
        for s in latency.series():
            long_polling, result = _OUTCOME_LABELS[s.outcome]
            values = [
                *node.values(),
                PROTOCOL_TYPE_REMOTING,
                code_desc(s.request_code, RequestCode),
                code_desc(s.response_code, ResponseCode),
                long_polling,
                result,
            ]
            cumulative, running = [], 0
            for bound, n in zip(_BOUNDS, s.buckets, strict=True):
                running += n
                cumulative.append((bound, running))
            family.add_metric(values, cumulative, s.sum_ms)
    return family


class RpcLatencyCollector(Collector):
    """Yields `histogram_family` of the process's servers at scrape time."""

    def __init__(self, sources: Sequence[tuple[Mapping[str, str], RpcLatency]]) -> None:
        self.sources = sources

    def collect(self) -> Iterator[Metric]:
        yield histogram_family(self.sources)
