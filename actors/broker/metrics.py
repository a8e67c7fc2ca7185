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
- ``rocketmq_topic_number`` and ``rocketmq_consumer_group_number``.

Nothing is counted for the exporter: `BrokerCollector` reads the counters the broker keeps
anyway (`stats_items.BrokerStatsManager`) and the offset tables when Prometheus scrapes, so
the send and pull paths cost the same with the exporter on or off.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rocketrio.actors.broker.stats_items import BrokerStatsManager
from rocketrio.actors.broker.topic_config import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

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
