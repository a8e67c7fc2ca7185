"""`rocketrio produce` and `rocketrio consume`: try the cluster by hand.

    rocketrio produce -n 127.0.0.1:9876 -t Orders -b "hello" -c 10 --tags a --keys k1
    rocketrio consume -n 127.0.0.1:9876 -t Orders -g cli_group --count 10

With ACL on, add ``--access-key alice --secret-key ...``: every request is then signed.

Both ask the name server for the topic's route first, so an unreachable name server or a topic
that does not exist is one line on stderr and exit status 1 before anything else happens
(`produce` goes on when a broker auto-creates topics, and says so). stdout carries the data
(one line per message); stderr carries the commentary: the summary at the end, the progress
bar, failures.

`produce -c N` prints one line per message for N <= 20 (or with ``--verbose``); for larger N a
progress bar on stderr when it is a terminal (``--quiet`` hides it), and always a summary: sent,
failed, elapsed, msgs/s, send statuses and counts per broker and queue. Exit status 0 when every
message was sent, 1 otherwise; it gives up after `MAX_FAILURES_IN_A_ROW` failed sends in a row.

`consume` prints one line per message and stops after ``--count`` messages or ``--idle``
seconds without one; it then says what it saw (the topic's queues and how many messages they
hold, how many of the queues this consumer held). A valid topic without messages is exit 0.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, TextIO

import attrs
import trio

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.config import DEFAULT_TOPIC, ClientConfig, request_signer
from rocketrio.actors.client.errors import MQClientError, NotFound, TopicRouteNotFound, UsageError
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.actors.observe.logs import configure_logging
from rocketrio.cli.failure import EXIT_FAILED, EXIT_OK, Wiring, one_line, run_tool
from rocketrio.cli.send_report import Output, SendTally, produce_output, progress_line
from rocketrio.cli.send_report import summary_lines as send_summary
from rocketrio.protocol.bodies import PERM_INHERIT, TopicRouteData

MAX_FAILURES_IN_A_ROW = 3  # each already retried by the producer within its send timeout
BAR_REDRAW_S = 0.1


def _missing_topic(topic: str, namesrv: str) -> NotFound:
    return NotFound(
        f"topic {topic} does not exist (no route at name server {namesrv}); create it with: "
        f"rocketrio admin updateTopic -n {namesrv} -t {topic}"
    )


async def topic_route_or_fail(admin: MQAdmin, topic: str, namesrv: str) -> TopicRouteData:
    """The topic's route; NotFound with a hint when the name server has none."""
    try:
        return await admin.topic_route(topic)
    except TopicRouteNotFound:
        raise _missing_topic(topic, namesrv) from None


async def check_produce_topic(admin: MQAdmin, topic: str, namesrv: str) -> str | None:
    """None when the topic exists; a note when a broker will create it on the first send
    (the auto-create key topic TBW102 is routed with the inherit bit); NotFound otherwise."""
    try:
        await admin.topic_route(topic)
        return None
    except TopicRouteNotFound:
        pass
    try:
        default = await admin.topic_route(DEFAULT_TOPIC)
    except TopicRouteNotFound:
        default = None
    creators = sorted(
        {q.brokerName for q in (default.queueDatas if default else []) if q.perm & PERM_INHERIT}
    )
    if not creators:
        info = await admin.cluster_info()
        why = (
            "no broker creates topics on send (autoCreateTopicEnable=false)"
            if info.brokerAddrTable
            else f"no broker is registered at name server {namesrv}"
        )
        raise NotFound(
            f"topic {topic} does not exist and {why}; create it with: "
            f"rocketrio admin updateTopic -n {namesrv} -t {topic}"
        )
    return (
        f"topic {topic} does not exist yet: {', '.join(creators)} will create it on the first "
        f"send (autoCreateTopicEnable=true)"
    )


class Bar:
    """The progress line on stderr, redrawn in place at most every `BAR_REDRAW_S`."""

    def __init__(self, out: TextIO, enabled: bool) -> None:
        self.out = out
        self.enabled = enabled
        self._drawn = 0
        self._last = -1.0

    def update(self, tally: SendTally, elapsed_s: float, *, force: bool = False) -> None:
        if not self.enabled or (not force and elapsed_s - self._last < BAR_REDRAW_S):
            return
        self._last = elapsed_s
        line = progress_line(tally, elapsed_s)
        self.out.write("\r" + line.ljust(self._drawn))
        self.out.flush()
        self._drawn = len(line)

    def clear(self) -> None:
        """Wipe the bar so a full line can be printed on stderr."""
        if self._drawn:
            self.out.write("\r" + " " * self._drawn + "\r")
            self.out.flush()
            self._drawn = 0
            self._last = -1.0


async def produce(a: argparse.Namespace, wiring: Wiring) -> int:
    from rocketrio.actors.client.message import Message
    from rocketrio.actors.client.producer import Producer

    if a.count < 1:
        raise UsageError(f"--count must be at least 1, got {a.count}")
    async with _admin(a, wiring) as admin:
        note = await check_produce_topic(admin, a.topic, a.namesrv)
    if note:
        print(note, file=sys.stderr)
    mode = produce_output(
        a.count, quiet=a.quiet, verbose=a.verbose, stderr_is_tty=sys.stderr.isatty()
    )
    tally = SendTally(a.topic, a.count)
    bar = Bar(sys.stderr, mode is Output.BAR)
    start = trio.current_time()
    in_a_row = 0
    try:
        async with Producer(a.group, a.namesrv, **_client_kwargs(a, wiring)) as p:
            for i in range(a.count):
                body = a.body.replace("{i}", str(i)).encode()
                try:
                    r = await p.send(Message(a.topic, body, tags=a.tags, keys=a.keys))
                except (MQClientError, RemotingError) as e:
                    reason = one_line(str(e))
                    tally.record_failure(reason)
                    in_a_row += 1
                    bar.clear()
                    print(f"failed #{i}: {reason}", file=sys.stderr)
                    if in_a_row >= MAX_FAILURES_IN_A_ROW:
                        print(
                            f"giving up after {in_a_row} failed sends in a row; "
                            f"{a.count - tally.done} message(s) not attempted",
                            file=sys.stderr,
                        )
                        break
                    continue
                in_a_row = 0
                tally.record(r)
                if mode is Output.LINES:
                    mq = r.message_queue
                    print(
                        f"sent #{i} {r.send_status.name} broker={mq.brokerName} "
                        f"queue={mq.queueId} offset={r.queue_offset} msgId={r.msg_id}"
                    )
                bar.update(tally, trio.current_time() - start)
    finally:
        elapsed = trio.current_time() - start
        bar.update(tally, elapsed, force=True)
        bar.clear()
        for line in send_summary(tally, elapsed):
            print(line, file=sys.stderr)
    return EXIT_OK if tally.sent == a.count else EXIT_FAILED


def _recv_line(m: Any) -> str:
    body = m.body.decode(errors="replace")
    if len(body) > 80:
        body = body[:77] + "..."
    return (
        f"recv {m.topic} queue={m.queue_id} offset={m.queue_offset} tags={m.tags or ''} "
        f"msgId={m.msg_id} body={body}"
    )


async def consume(a: argparse.Namespace, wiring: Wiring) -> int:
    from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer

    if a.count < 0 or a.idle <= 0:
        raise UsageError("--count must be >= 0 and --idle > 0")
    async with _admin(a, wiring) as admin:
        await topic_route_or_fail(admin, a.topic, a.namesrv)

    seen = 0
    last = trio.current_time()
    done = trio.Event()

    def on_msgs(msgs: list[Any]) -> ConsumeStatus:
        nonlocal seen, last
        for m in msgs:
            seen += 1
            print(_recv_line(m))
        last = trio.current_time()
        if a.count and seen >= a.count:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        a.group,
        a.namesrv,
        message_model="BROADCASTING" if a.broadcast else "CLUSTERING",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET"
        if a.from_first
        else "CONSUME_FROM_LAST_OFFSET",
        **_client_kwargs(a, wiring),
    )
    consumer.subscribe(a.topic, a.expr)
    consumer.register_listener(on_msgs)
    held: set[Any] = set()
    async with consumer:
        while not done.is_set():
            with trio.move_on_after(0.2):
                await done.wait()
            held |= {mq for mq in consumer.assigned_queues() if mq.topic == a.topic}
            if trio.current_time() - last > a.idle:
                break
    if done.is_set():
        line = f"consumed {seen} message(s) from {a.topic} (--count {a.count} reached)"
        print(line, file=sys.stderr)
        return EXIT_OK
    print(
        f"consumed {seen} message(s) from {a.topic}; stopped after {a.idle:g} s without a message",
        file=sys.stderr,
    )
    async with _admin(a, wiring) as admin:
        stats = await admin.topic_status(a.topic)
    brokers = sorted({o.brokerName for o in stats})
    stored = sum(o.maxOffset - o.minOffset for o in stats)
    print(
        f"topic {a.topic}: {len(stats)} queue(s) on {', '.join(brokers) or 'no broker'} holding "
        f"{stored} message(s); this consumer held {len(held)} of them",
        file=sys.stderr,
    )
    return EXIT_OK


def _client_kwargs(a: argparse.Namespace, wiring: Wiring) -> dict[str, Any]:
    """Producer / PushConsumer keyword arguments, signing with --access-key/--secret-key and
    tracing with --trace (the lines go to --log-dir/<tool>-<pid>.jsonl)."""
    kw = wiring.client_kwargs()
    if request_signer(a.access_key, a.secret_key) is not None:  # UsageError if only one
        base = kw.get("client_config") or ClientConfig()
        kw["client_config"] = attrs.evolve(
            base, accessKey=a.access_key or "", secretKey=a.secret_key or ""
        )
    if getattr(a, "trace", False):
        if not a.log_dir:
            raise UsageError("--trace writes JSON log lines: give --log-dir DIR")
        base = kw.get("client_config") or ClientConfig()
        kw["client_config"] = attrs.evolve(base, trace=True)
        node = f"{a.tool.split()[-1]}-{os.getpid()}"
        configure_logging(node, "client", a.log_dir, console=None)
    return kw


def add_tracing(p: argparse.ArgumentParser) -> None:
    """--trace/--log-dir: one JSON line per acked send / consumed message, for `analyze`."""
    p.add_argument(
        "--trace",
        action="store_true",
        help="log each acknowledged send / consumed message (rocketrio analyze reads them)",
    )
    p.add_argument("--log-dir", help="directory of the JSON log file (with --trace)")


def _admin(a: argparse.Namespace, wiring: Wiring) -> MQAdmin:
    return MQAdmin(
        a.namesrv, wiring.transport, request_hook=request_signer(a.access_key, a.secret_key)
    )


def add_credentials(p: argparse.ArgumentParser) -> None:
    """--access-key/--secret-key: sign every request (ACL 2.0 session credentials)."""
    p.add_argument("--access-key", help="ACL access key (a user name); signs every request")
    p.add_argument("--secret-key", help="ACL secret key (that user's password)")


def add_parser(sub: Any) -> None:
    """The `produce` and `consume` subcommands (one module, two commands)."""
    p = sub.add_parser("produce", help="send messages")
    p.add_argument("-n", "--namesrv", default="127.0.0.1:9876")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-b", "--body", default="hello rocketrio {i}", help="{i} is the message number")
    p.add_argument("-c", "--count", type=int, default=1)
    p.add_argument("--tags")
    p.add_argument("--keys")
    p.add_argument("-g", "--group", default="cli_producer")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "-v", "--verbose", action="store_true", help="one line per message even for large -c"
    )
    add_credentials(p)
    add_tracing(p)
    p.set_defaults(
        func=lambda a: run_tool("rocketrio produce", produce, a),
        run=produce,
        tool="rocketrio produce",
    )

    c = sub.add_parser("consume", help="receive messages")
    c.add_argument("-n", "--namesrv", default="127.0.0.1:9876")
    c.add_argument("-t", "--topic", required=True)
    c.add_argument("-g", "--group", default="cli_consumer")
    c.add_argument("-e", "--expr", default="*", help='tag expression, e.g. "a || b"')
    c.add_argument("--count", type=int, default=0, help="stop after this many messages")
    c.add_argument("--idle", type=float, default=10.0, help="stop after this many idle seconds")
    c.add_argument("--from-first", action="store_true", help="a new group starts at the oldest")
    c.add_argument("--broadcast", action="store_true")
    add_credentials(c)
    add_tracing(c)
    c.set_defaults(
        func=lambda a: run_tool("rocketrio consume", consume, a),
        run=consume,
        tool="rocketrio consume",
    )
