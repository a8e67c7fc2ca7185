"""The broker's Prometheus metrics (``metricsExporterType=PROM``), with upstream's names and
labels (BrokerMetricsConstant): every series carries ``cluster``, ``node_type="broker"`` and
``node_id`` (the broker name).

- ``rocketmq_messages_in_total`` / ``rocketmq_throughput_in_total`` (messages / bytes stored,
  labels ``topic``, ``message_type``, ``is_system``; retry and DLQ topics left out, as upstream's
  SendMessageProcessor does);
- ``rocketmq_messages_out_total`` / ``rocketmq_throughput_out_total`` (messages / bytes pulled,
  labels ``topic``, ``consumer_group``, ``is_retry``, ``is_system``);
- ``rocketmq_consumer_lag_messages`` (``consumer_group``, ``topic``, ``is_retry``,
  ``is_system``: the committed offsets behind each queue's max offset, never negative);
- ``rocketmq_topic_number`` and ``rocketmq_consumer_group_number``;
- ``rocketmq_storage_size`` and ``rocketmq_storage_flush_behind_bytes`` (DefaultStoreMetrics
  names, with its ``storage_type="local"`` and ``storage_medium="disk"`` labels). The size is the
  bytes of messages the CommitLog holds (its max offset less its min offset), not upstream's
  "used bytes of the whole disk holding storePathRootDir", which moves with anything else on
  that disk; flush-behind is the CommitLog bytes written but not yet fsynced.

Ours, where upstream has no metric (replication, named in upstream's style):

- ``rocketmq_confirm_offset``: the broker's confirmOffset (what consumers may read up to), on a
  master and on a slave alike;
- ``rocketmq_replication_lag_bytes`` (labels ``slave_id``, ``slave_addr``): on a master, per
  connected slave that has acked, the CommitLog end less the slave's acked offset;
- ``rocketmq_replication_lag_latency`` (same labels, milliseconds): 0 while the slave is caught
  up, else how long since it last was (the ``caught up`` time the SyncStateSet check keeps,
  haMaxTimeSlaveNotCatchup's clock).

Nothing is counted for the exporter: `BrokerCollector` reads the counters the broker keeps
anyway (`stats_items.BrokerStatsManager`) and the offset tables, and `StoreCollector` the
store's offsets and the HA master's view, when Prometheus scrapes, so the send and pull paths
cost the same with the exporter on or off (rocketmq_rpc_latency, timed in the remoting layer, is
rpc_metrics.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import attrs
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rocketrio.actors.broker.ha.status_body import MasterView
from rocketrio.actors.broker.stats.items import BrokerStatsManager
from rocketrio.actors.broker.tables.topic_config import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
)

NODE_LABELS = ("cluster", "node_type", "node_id")


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _retry_or_dlq(topic: str) -> bool:
    return topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))


class BrokerCollector(Collector):
    """Reads the broker's counters at scrape time (see the module docstring)."""

    def __init__(
        self,
        *,
        cluster: str,
        broker_name: str,
        items: BrokerStatsManager,
        is_system_topic: Callable[[str], bool],
        topic_count: Callable[[], int],
        group_count: Callable[[], int],
        lags: Callable[[], list[tuple[str, str, int]]],
    ) -> None:
        self.node = (cluster, "broker", broker_name)
        self.items = items
        self.is_system_topic = is_system_topic
        self.topic_count = topic_count
        self.group_count = group_count
        self.lags = lags

    def collect(self) -> Iterator[Metric]:
        node = self.node
        in_labels = [*NODE_LABELS, "topic", "message_type", "is_system"]
        msgs_in = CounterMetricFamily(
            "rocketmq_messages_in", "Messages stored, by topic.", labels=in_labels
        )
        bytes_in = CounterMetricFamily(
            "rocketmq_throughput_in", "Bytes stored, by topic.", labels=in_labels
        )
        for topic, (msgs, _requests, nbytes) in list(self.items.topic_put.items()):
            if _retry_or_dlq(topic):
                continue
            values = [*node, topic, "normal", _flag(self.is_system_topic(topic))]
            msgs_in.add_metric(values, msgs)
            bytes_in.add_metric(values, nbytes)
        out_labels = [*NODE_LABELS, "topic", "consumer_group", "is_retry", "is_system"]
        msgs_out = CounterMetricFamily(
            "rocketmq_messages_out", "Messages pulled, by topic and group.", labels=out_labels
        )
        bytes_out = CounterMetricFamily(
            "rocketmq_throughput_out", "Bytes pulled, by topic and group.", labels=out_labels
        )
        for (topic, group), (msgs, _requests, nbytes) in list(self.items.group_get.items()):
            values = [*node, topic, group, *self._kind(topic)]
            msgs_out.add_metric(values, msgs)
            bytes_out.add_metric(values, nbytes)
        lag = GaugeMetricFamily(
            "rocketmq_consumer_lag_messages",
            "Messages a group has not consumed yet, by group and topic.",
            labels=[*NODE_LABELS, "consumer_group", "topic", "is_retry", "is_system"],
        )
        for group, topic, behind in self.lags():
            lag.add_metric([*node, group, topic, *self._kind(topic)], behind)
        topics = GaugeMetricFamily(
            "rocketmq_topic_number", "Topics on this broker.", labels=list(NODE_LABELS)
        )
        topics.add_metric(list(node), self.topic_count())
        groups = GaugeMetricFamily(
            "rocketmq_consumer_group_number",
            "Subscription groups on this broker.",
            labels=list(NODE_LABELS),
        )
        groups.add_metric(list(node), self.group_count())
        yield from (msgs_in, bytes_in, msgs_out, bytes_out, lag, topics, groups)

    def _kind(self, topic: str) -> tuple[str, str]:
        """(is_retry, is_system) label values of a topic."""
        retry = topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        return _flag(retry), _flag(self.is_system_topic(topic))


STORE_LABELS = (*NODE_LABELS, "storage_type", "storage_medium")
LOCAL_DISK = ("local", "disk")
SLAVE_LABELS = (*NODE_LABELS, "slave_id", "slave_addr")


@attrs.frozen(slots=True)
class SlaveLag:
    """How far one slave is behind its master."""

    slave_id: int
    addr: str
    lag_bytes: int
    lag_ms: int | None  # None: when it last caught up is not known


def slave_lags(view: MasterView, caught_up_ms: Mapping[int, int], now_ms: int) -> list[SlaveLag]:
    """Per slave connection that has handshaken and acked: bytes behind the master's CommitLog
    end, and ms since it was last caught up (0 while it is)."""
    lags = []
    for link in view.links:
        if link.slave_id is None or link.ack_offset < 0:
            continue  # nothing acked yet: how far behind it is, nobody knows
        behind = max(0, view.max_offset - link.ack_offset)
        since = caught_up_ms.get(link.slave_id)
        lag_ms = 0 if behind == 0 else (None if since is None else max(0, now_ms - since))
        lags.append(SlaveLag(link.slave_id, link.addr, behind, lag_ms))
    return lags


class StoreCollector(Collector):
    """Reads the store's offsets and the HA view at scrape time (see the module docstring)."""

    def __init__(
        self,
        *,
        cluster: str,
        broker_name: str,
        store_bytes: Callable[[], int],
        flush_behind_bytes: Callable[[], int],
        confirm_offset: Callable[[], int],
        master_view: Callable[[], MasterView | None],
        caught_up_ms: Callable[[], Mapping[int, int]],
        now_ms: Callable[[], int],
    ) -> None:
        self.node = (cluster, "broker", broker_name)
        self.store_bytes = store_bytes
        self.flush_behind_bytes = flush_behind_bytes
        self.confirm_offset = confirm_offset
        self.master_view = master_view
        self.caught_up_ms = caught_up_ms
        self.now_ms = now_ms

    def collect(self) -> Iterator[Metric]:
        node = list(self.node)
        size = GaugeMetricFamily(
            "rocketmq_storage_size",
            "Bytes of messages the CommitLog holds.",
            labels=list(STORE_LABELS),
        )
        size.add_metric([*node, *LOCAL_DISK], self.store_bytes())
        flush = GaugeMetricFamily(
            "rocketmq_storage_flush_behind_bytes",
            "CommitLog bytes written but not yet flushed to disk.",
            labels=list(STORE_LABELS),
        )
        flush.add_metric([*node, *LOCAL_DISK], self.flush_behind_bytes())
        confirm = GaugeMetricFamily(
            "rocketmq_confirm_offset",
            "The broker's confirmOffset: consumers read up to it.",
            labels=list(NODE_LABELS),
        )
        confirm.add_metric(node, self.confirm_offset())
        lag_bytes = GaugeMetricFamily(
            "rocketmq_replication_lag_bytes",
            "On a master: CommitLog bytes a slave has not acked.",
            labels=list(SLAVE_LABELS),
        )
        lag_ms = GaugeMetricFamily(
            "rocketmq_replication_lag_latency",
            "On a master: ms since a slave that is behind was last caught up (0: caught up).",
            labels=list(SLAVE_LABELS),
        )
        view = self.master_view()
        if view is not None:
            for lag in slave_lags(view, self.caught_up_ms(), self.now_ms()):
                values = [*node, str(lag.slave_id), lag.addr]
                lag_bytes.add_metric(values, lag.lag_bytes)
                if lag.lag_ms is not None:
                    lag_ms.add_metric(values, lag.lag_ms)
        yield from (size, flush, confirm, lag_bytes, lag_ms)
