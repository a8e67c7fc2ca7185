"""The topic table's rules (actors/broker/tables/topic_config.py): topic names, queue numbers and
permissions, system topics and auto-creation.
"""

from __future__ import annotations

import pytest

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.tables.topic_config import (
    TopicConfigManager,
    check_perm,
    check_queue_nums,
    check_topic_name,
)
from rocketrio.protocol.bodies import TopicConfigSerializeWrapper


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("Orders", None),
        ("%RETRY%group-1|x_y", None),
        ("", "blank"),
        ("a b", "illegal characters"),
        ("a.b", "illegal characters"),
        ("x" * 127, None),
        ("x" * 128, "longer than topic max length"),
    ],
)
def test_topic_names(name: str, problem: str | None) -> None:
    result = check_topic_name(name)
    assert (result is None) if problem is None else (problem in (result or ""))


@pytest.mark.parametrize(
    ("read", "write", "perm", "ok"),
    [(1, 1, 6, True), (1024, 8, 2, True), (0, 1, 6, False), (1, 1025, 6, False), (1, 1, 16, False)],
)
def test_queue_nums_and_perm(read: int, write: int, perm: int, ok: bool) -> None:
    assert (check_queue_nums(read, write) is None and check_perm(perm) is None) == ok


def _topics(**config: object) -> TopicConfigManager:
    mgr = TopicConfigManager(BrokerConfig(**config), lambda: 1000)  # type: ignore[arg-type]
    mgr.load(TopicConfigSerializeWrapper())
    return mgr


def test_system_topics_and_auto_create() -> None:
    mgr = _topics(defaultTopicQueueNums=8)
    tbw = mgr.select("TBW102")
    assert tbw is not None and tbw.perm == 7 and tbw.writeQueueNums == 8
    assert mgr.select("broker-a") is not None and mgr.select("DefaultCluster") is not None
    assert mgr.is_system_topic("broker-a") and mgr.is_system_topic("rmq_sys_x")
    version = mgr.data_version.counter
    created = mgr.create_in_send("New", "TBW102", 4)
    assert created is not None and (created.readQueueNums, created.perm) == (4, 6)
    assert mgr.data_version.counter == version + 1
    assert mgr.create_in_send("Big", "TBW102", 64).writeQueueNums == 8  # type: ignore[union-attr]
    assert mgr.create_in_send("Other", "NoSuchDefault", 4) is None


def test_auto_create_disabled() -> None:
    mgr = _topics(autoCreateTopicEnable=False)
    assert mgr.select("TBW102") is None
    assert mgr.create_in_send("New", "TBW102", 4) is None
    retry, created = mgr.create_in_send_back("%RETRY%g", 1, 6)
    assert created and retry.readQueueNums == 1
    assert mgr.create_in_send_back("%RETRY%g", 5, 6) == (retry, False)
