"""Metadata survives every failover (SPEC F4, issue 26 items 1-2): named whole-cluster scenarios.

Each script runs on the world of the seeded simulation (tests/sim/cluster_sim.py) with the
metadata invariants of tests/sim/metadata_checks.py checked after every step (queue counts and
permissions change only by operator command, no record outside a topic's queues, deletes stay
deleted, consumer offsets rewind by at most the bound), and each invariant is shown to catch a
mutant of tests/sim/mutants.py.

- `script_first_sends_then_freeze`: the reported bug. An operator creates a 4-queue topic on
  the master (the brokers' defaultTopicQueueNums is 2), the first sends are acknowledged, and
  the master freezes at once (cut from everyone, like SIGSTOP): the slave is promoted holding
  the records, and must serve the topic with 4 queues, not adopt it with a default count.
- `script_delete_then_failover` / `script_delete_then_restart`: an operator deletes a topic and
  a group; then the master freezes (failover) or the whole set restarts (kill -9, or a power
  cut): neither comes back. Before the metadata journal (mutant `adopt_with_default_queues`)
  a deleted topic came back after a failover, and after a power cut of the set (the removal
  of its ConsumeQueue directory was not fsynced, and a new master adopted what it found).
- `script_offsets_across_failover`: a consumer group commits offsets to the master while it
  consumes; the master freezes; the new master's offsets are measured against the bound
  (`offsets_slow_link`: the same over a master-slave link of 0.6 s each way).
- `script_send_back_across_failover`: a consumer's send-back (a retry at delay level 1) is
  acknowledged and the master freezes at once: the promoted slave delivers the retry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

import pytest
import trio
import trio.testing

from rocketrio.actors.broker.tables.topic_config import retry_topic
from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.api import parse_pull_response, request
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError
from rocketrio.protocol.bodies import SubscriptionGroupConfig, TopicConfig
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketrio.protocol.message import decode_stored
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, to_ext
from tests.harness.clock import EPOCH_MS
from tests.sim.cluster_checks import ClusterFailure
from tests.sim.cluster_clients import TOPIC, pull_header, pull_once
from tests.sim.cluster_nodes import BrokerProc
from tests.sim.cluster_run import run_seed
from tests.sim.cluster_sim import World
from tests.sim.metadata_checks import OFFSET_LAG_BOUND_S
from tests.sim.mutants import applied
from tests.sim.scenario_kit import SEED, A, full_set, hold, master_proc, spec, wait_until

ME = "10.0.9.70"  # this script's own client
CLIENTS = [*(f"10.0.9.{k}" for k in range(1, 9)), "10.0.9.50", "10.0.9.60", ME]
NEW_TOPIC = "MetaT"
DOOMED, DOOMED_GROUP = "Doomed", "DoomedG"
GROUP = "MetaCG"


async def run(name: str, script: Callable[[World], Awaitable[None]]) -> None:
    await run_seed(
        SEED, spec=spec(queues=2, set_sizes=(2, 2)), chaos=script,
        replay=f"pytest tests/sim/test_metadata_failover.py -k {name}",
    )  # fmt: skip


# ---------------------------------------------------------------------------- helpers


def freeze(w: World, p: BrokerProc) -> None:
    """SIGSTOP as the cluster sees it: nobody (processes or clients) hears from ``p``."""
    w.partition([p.host.ip], [q.host.ip for q in w.processes if q is not p] + CLIENTS)
    w.checker.note(f"froze {p.name} (t={trio.current_time():.2f})")


def slave_of(w: World, m: BrokerProc) -> BrokerProc:
    return next(p for p in w.brokers[A] if p is not m)


async def create_topic(w: World, admin: MQAdmin, addr: str, tc: TopicConfig) -> None:
    w.meta.topic_command(A, tc)
    await admin.update_topic(
        tc.topicName, broker_addr=addr, read_queues=tc.readQueueNums,
        write_queues=tc.writeQueueNums, perm=tc.perm,
    )  # fmt: skip
    w.meta.topic_answered(A, tc)


async def send(client: RemotingClient, addr: str, topic: str, queue_id: int, body: bytes) -> int:
    """One raw sync send; the response code."""
    v1 = SendMessageRequestHeader(
        producerGroup="MetaPG", topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=4,
        queueId=queue_id, sysFlag=0, bornTimestamp=EPOCH_MS, flag=0,
    )  # fmt: skip
    cmd = RemotingCommand(
        code=RequestCode.SEND_MESSAGE_V2,
        ext_fields=to_ext(SendMessageRequestHeaderV2.from_v1(v1)),
        body=body,
    )
    resp = await client.invoke(addr, cmd, 3.0)
    if resp.code == ResponseCode.SUCCESS:
        from_ext(SendMessageResponseHeader, resp.ext_fields)
    return resp.code


async def promoted(w: World, old: BrokerProc) -> BrokerProc:
    s = slave_of(w, old)
    await wait_until(w, lambda: w.master_of(A) is s, 20, f"{s.name} promoted")
    return s


# ---------------------------------------------------------------------------- scripts


async def script_first_sends_then_freeze(w: World) -> None:
    await full_set(w)
    m = master_proc(w)
    async with (
        MQAdmin(";".join(w.ns_addrs), w.net.transport(ME)) as admin,
        RemotingClient(w.net.transport(ME)) as client,
    ):
        await create_topic(w, admin, m.addr, TopicConfig(NEW_TOPIC, 4, 4))
        for q in (0, 1):  # the topic's first sends, acknowledged (on the SyncStateSet)
            assert await send(client, m.addr, NEW_TOPIC, q, b"first-%d" % q) == 0
        freeze(w, m)
        s = await promoted(w, m)
        b = s.live_broker
        assert b is not None and b.store.message_store.get_max_offset(NEW_TOPIC, 1) == 1
        await hold(w, 2, "the promoted slave serves")
        # an out-of-range queue id is refused (nothing stored outside the topic's queues)
        code = await send(client, s.addr, NEW_TOPIC, 5, b"out-of-range")
        w.checker.note(f"send to queue 5 of a 4-queue topic answered {code}")
        await hold(w, 1, "after the out-of-range send")
    w.heal_network()


async def _delete(w: World, m: BrokerProc) -> None:
    async with (
        MQAdmin(";".join(w.ns_addrs), w.net.transport(ME)) as admin,
        RemotingClient(w.net.transport(ME)) as client,
    ):
        await create_topic(w, admin, m.addr, TopicConfig(DOOMED, 2, 2))
        await admin.update_sub_group(SubscriptionGroupConfig(DOOMED_GROUP), [m.addr])
        for k in range(6):
            assert await send(client, m.addr, DOOMED, k % 2, b"doomed-%d" % k) == 0
        await hold(w, 4, "the slave syncs the topic and the group")
        # an operator deletes on the master (upstream mqadmin deletes on the masters)
        await client.invoke(
            m.addr,
            RemotingCommand(RequestCode.DELETE_TOPIC_IN_BROKER, ext_fields={"topic": DOOMED}),
            5.0,
        )
        await admin.delete_sub_group(DOOMED_GROUP, [m.addr], clean_offset=True)
    w.meta.topic_deleted(A, DOOMED)
    w.meta.group_deleted(A, DOOMED_GROUP)
    await hold(w, 4, "the slave syncs the deletes")


async def script_delete_then_failover(w: World) -> None:
    await full_set(w)
    m = master_proc(w)
    await _delete(w, m)
    freeze(w, m)
    await promoted(w, m)
    await hold(w, 3, "the promoted slave serves")
    w.heal_network()


async def script_delete_then_restart(w: World, *, power_cut: bool = False) -> None:
    await full_set(w)
    m = master_proc(w)
    await _delete(w, m)
    for p in w.brokers[A]:
        # kill -9 keeps the page cache; a power cut keeps only what was fsynced
        await w.kill(p, machine=power_cut, lose=power_cut)
    w.checker.note(f"{'power cut of' if power_cut else 'killed'} every broker of the set")
    for p in w.brokers[A]:
        await w.restart(p)
    await wait_until(w, lambda: w.master_of(A) is not None, 30, "the set has a master again")
    await hold(w, 3, "after the restart")


async def _consume_and_commit(w: World, m: BrokerProc, client: RemotingClient) -> None:
    """Pull every queue of the topic from the master and commit after each pull (a consumer
    persisting its offsets often); every commit the master answered is recorded."""
    nxt = dict.fromkeys(range(w.spec.queues), 0)
    while True:
        for qid in nxt:
            got = await pull_once(client, m.addr, qid, nxt[qid], timeout_s=1.0)
            if got is None:
                continue
            _status, next_begin, _msgs = got
            nxt[qid] = max(nxt[qid], next_begin)
            header = UpdateConsumerOffsetRequestHeader(GROUP, TOPIC, qid, nxt[qid])
            cmd = RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields=to_ext(header))
            try:
                resp = await client.invoke(m.addr, cmd, 1.0)
            except RemotingError:
                continue
            if resp.code == ResponseCode.SUCCESS:
                w.meta.on_offset_committed((A, GROUP, TOPIC, qid), trio.current_time(), nxt[qid])
        await trio.sleep(0.3)


async def _run_in(
    scope: trio.CancelScope, fn: Callable[..., Awaitable[None]], *args: object
) -> None:
    with scope:
        await fn(*args)


async def _slave_within_the_bound(w: World, slave: BrokerProc, worst: list[float]) -> None:
    """While it follows the master: the slave's committed offset of every queue is at least
    what the consumer had committed `OFFSET_LAG_BOUND_S` before (one SlaveSynchronize period
    and one call), whatever the phase of its sync rounds. ``worst[0]``: the largest lag seen
    (the age of the oldest commit the slave does not reflect)."""
    while True:
        await trio.sleep(0.25)
        b, now = slave.live_broker, trio.current_time()
        for (_s, group, topic, qid), history in w.meta.commits.items():
            floor = max((o for t, o in history if t <= now - OFFSET_LAG_BOUND_S), default=-1)
            have = -1 if b is None else b.tables.offsets.query(group, topic, qid)
            missing = [t for t, o in history if o > have]
            worst[0] = max(worst[0], now - min(missing, default=now))
            if have < floor:
                w.checker.fail(
                    f"slave {slave.name}: {group} {topic}:{qid} holds {have}, behind {floor} "
                    f"committed to its master more than {OFFSET_LAG_BOUND_S}s ago"
                )


async def script_offsets_across_failover(
    w: World, slow_link_s: float = 0.0, hold_s: float = 12.0
) -> None:
    """With ``slow_link_s``, the master-slave link takes that long each way: a round of the
    slave's SlaveSynchronize (six calls) takes about 7 s on 0.6 s, and the offsets must still
    keep the bound (before they had a loop of their own they waited for the round)."""
    await full_set(w)
    m = master_proc(w)
    if slow_link_s:
        w.net.set_delay(m.host.ip, slave_of(w, m).host.ip, slow_link_s)
        w.checker.note(f"master-slave link +{slow_link_s}s each way")
    async with RemotingClient(w.net.transport(ME)) as client, trio.open_nursery() as n:
        n.start_soon(_consume_and_commit, w, m, client)
        lag, worst = trio.CancelScope(), [0.0]
        n.start_soon(_run_in, lag, _slave_within_the_bound, w, slave_of(w, m), worst)
        await hold(w, hold_s, "consuming and committing")
        lag.cancel()
        stopped_at = trio.current_time()
        freeze(w, m)
        s = await promoted(w, m)
        n.cancel_scope.cancel()
    b = s.live_broker
    assert b is not None
    w.meta.check_offsets(A, s.name, stopped_at, b.tables.offsets.query)
    measured = (
        f"offsets: rewound at most {w.meta.rewound_msgs_max} messages, "
        f"{w.meta.rewound_s_max:.2f}s of commits (bound {OFFSET_LAG_BOUND_S}s); "
        f"the slave lagged at most {worst[0]:.2f}s before the freeze"
    )
    w.checker.note(measured)
    print(measured)  # docs/metadata-failover.md quotes it
    assert w.meta.commits, "the consumer committed nothing"
    w.heal_network()


async def _send_back_one(w: World, m: BrokerProc, client: RemotingClient) -> bytes:
    """Pull one message of the topic from the master and send it back for a retry (delay
    level 1: 1 s), as a consumer whose listener failed does; the body once acknowledged."""
    for _ in range(100):
        for qid in range(w.spec.queues):
            resp = await client.invoke(
                m.addr, request(RequestCode.PULL_MESSAGE, pull_header(qid, 0, 1)), 3.0
            )
            got = parse_pull_response(resp, m.addr).messages()
            if not got:
                continue
            header = ConsumerSendMsgBackRequestHeader(
                offset=got[0].commitlog_offset, group=GROUP, delayLevel=1,
                originMsgId=got[0].msg_id, originTopic=TOPIC, maxReconsumeTimes=16,
            )  # fmt: skip
            cmd = RemotingCommand(RequestCode.CONSUMER_SEND_MSG_BACK, ext_fields=to_ext(header))
            answer = await client.invoke(m.addr, cmd, 5.0)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            return got[0].body
        await trio.sleep(0.2)
    raise AssertionError("no message to send back")


def _retry_bodies(p: BrokerProc) -> list[bytes]:
    b = p.live_broker
    if b is None:
        return []
    store = b.store.message_store
    out: list[bytes] = []
    for qid in range(4):
        topic = retry_topic(GROUP)
        end = store.get_max_offset(topic, qid)
        if end:
            res = store.get_messages(topic, qid, 0, end, 1 << 22)
            out += [decode_stored(raw)[0].body for raw in res.buffers]
    return out


async def script_send_back_across_failover(w: World) -> None:
    """Issue 26's "send-back during a failover": a consumer's send-back is acknowledged, the
    master freezes at once; the promoted slave holds the retry (waiting at its delay level),
    knows the retry topic as the old master created it, and delivers it to the retry queue."""
    await full_set(w)
    m = master_proc(w)
    async with RemotingClient(w.net.transport(ME)) as client:
        await hold(w, 2, "traffic")
        body = await _send_back_one(w, m, client)
        freeze(w, m)
    s = await promoted(w, m)
    await wait_until(
        w, lambda: body in _retry_bodies(s), 15, "the retry reached the new master's retry queue"
    )
    b = s.live_broker
    assert b is not None
    tc = b.tables.topics.select(retry_topic(GROUP))
    assert tc is not None and (tc.readQueueNums, tc.writeQueueNums) == (1, 1), tc
    w.heal_network()


# ---------------------------------------------------------------------------- tests

SCRIPTS = {
    "first_sends": script_first_sends_then_freeze,
    "delete_failover": script_delete_then_failover,
    "delete_restart": script_delete_then_restart,
    "delete_power_cut": partial(script_delete_then_restart, power_cut=True),
    "offsets": script_offsets_across_failover,
    "offsets_slow_link": partial(script_offsets_across_failover, slow_link_s=0.6),
    "send_back": script_send_back_across_failover,
}


@pytest.mark.parametrize("name", list(SCRIPTS))
async def test_metadata_survives(mock_clock: trio.testing.MockClock, name: str) -> None:
    await run(name, SCRIPTS[name])


@pytest.mark.parametrize(
    ("mutant", "name"),
    [
        ("adopt_with_default_queues", "first_sends"),
        ("send_accepts_any_queue_id", "first_sends"),
        ("adopt_with_default_queues", "delete_failover"),
        ("topic_delete_not_persisted", "delete_restart"),
        ("adopt_with_default_queues", "delete_power_cut"),
        ("slave_sync_skips_offsets", "offsets"),
        ("slave_sync_offsets_behind_the_round", "offsets_slow_link"),
        ("adopt_with_default_queues", "send_back"),
    ],
)
async def test_the_metadata_checks_catch_a_broken_product(
    mock_clock: trio.testing.MockClock, mutant: str, name: str
) -> None:
    """Teeth: each invariant fails the run against the mutant that breaks it."""
    with applied(mutant), pytest.raises(ClusterFailure) as caught:
        await run(f"{mutant}-{name}", SCRIPTS[name])
    print(f"{mutant} caught by {name}: {str(caught.value).splitlines()[0]}")
