"""`rocketrio produce` and `rocketrio consume`: try the cluster by hand.

    rocketrio produce -n 127.0.0.1:9876 -t Orders -b "hello" -c 10 --tags a --keys k1
    rocketrio consume -n 127.0.0.1:9876 -t Orders -g cli_group --count 10

With ACL on, add ``--access-key alice --secret-key ...``: every request is then signed.

`produce` prints one line per message (queue, offset, msg id); `consume` prints one line per
message and stops after ``--count`` messages or ``--idle`` seconds without a message.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import trio


async def _produce(a: argparse.Namespace) -> int:
    from rocketrio.actors.client.message import Message
    from rocketrio.actors.client.producer import Producer

    async with Producer(a.group, a.namesrv, client_config=_client_config(a)) as p:
        for i in range(a.count):
            body = a.body.replace("{i}", str(i)).encode()
            r = await p.send(Message(a.topic, body, tags=a.tags, keys=a.keys))
            mq = r.message_queue
            print(
                f"sent #{i} {r.send_status.name} broker={mq.brokerName} queue={mq.queueId} "
                f"offset={r.queue_offset} msgId={r.msg_id}"
            )
    return 0


async def _consume(a: argparse.Namespace) -> int:
    from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer

    seen = 0
    last = time.monotonic()
    done = trio.Event()

    def on_msgs(msgs: list[Any]) -> ConsumeStatus:
        nonlocal seen, last
        for m in msgs:
            seen += 1
            body = m.body.decode(errors="replace")
            if len(body) > 80:
                body = body[:77] + "..."
            print(
                f"recv {m.topic} queue={m.queue_id} offset={m.queue_offset} tags={m.tags or ''} "
                f"msgId={m.msg_id} body={body}"
            )
        last = time.monotonic()
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
        client_config=_client_config(a),
    )
    consumer.subscribe(a.topic, a.expr)
    consumer.register_listener(on_msgs)
    async with consumer:
        while not done.is_set():
            with trio.move_on_after(0.2):
                await done.wait()
            if a.idle and time.monotonic() - last > a.idle:
                break
    print(f"consumed {seen} messages", file=sys.stderr)
    return 0


def _client_config(a: argparse.Namespace) -> Any:
    from rocketrio.actors.client.config import ClientConfig

    return ClientConfig(accessKey=a.access_key or "", secretKey=a.secret_key or "")


def add_credentials(p: argparse.ArgumentParser) -> None:
    """--access-key/--secret-key: sign every request (ACL 2.0 session credentials)."""
    p.add_argument("--access-key", help="ACL access key (a user name); signs every request")
    p.add_argument("--secret-key", help="ACL secret key (that user's password)")


def _run(fn: Any, a: argparse.Namespace) -> int:
    from rocketrio.actors.logs import configure_logging

    configure_logging(a.command, "client", None, console=None)
    try:
        return int(trio.run(fn, a))
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        print(f"rocketrio {a.command}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("produce", help="send messages")
    p.add_argument("-n", "--namesrv", default="127.0.0.1:9876")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-b", "--body", default="hello rocketrio {i}", help="{i} is the message number")
    p.add_argument("-c", "--count", type=int, default=1)
    p.add_argument("--tags")
    p.add_argument("--keys")
    p.add_argument("-g", "--group", default="cli_producer")
    add_credentials(p)
    p.set_defaults(func=lambda a: _run(_produce, a))

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
    c.set_defaults(func=lambda a: _run(_consume, a))
