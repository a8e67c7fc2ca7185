"""ACL 2.0 cost: produce and consume with authentication + authorization on vs off, same run.

Starts a NameServer and two brokers as processes on loopback: ``bench-open`` (auth off) and
``bench-auth`` (authenticationEnabled + authorizationEnabled, init super user ``root``). On the
auth broker a Normal user ``alice`` gets Pub/Sub on the topic and Sub on the consumer group, so
every request is signed by the client and verified and authorized by the broker (the super-user
bypass is not what is measured). Then, alternating open/auth ``--rounds`` times (so neither side
always runs first on a warm machine):

- single_produce_msgs_per_s  send_async of 1 KiB messages, 256 in flight
- consume_msgs_per_s         a push consumer group reading that backlog from offset 0

Prints ONE JSON line with each round's figures, the medians, and auth/open ratios, plus the
in-process cost of one signed SEND_MESSAGE_V2 (1 KiB body): ``sign_us`` on the client and
``gate_us`` (verify + authorize) on the broker, which are steadier than the throughputs on a
shared machine.

    .venv/bin/python bench/auth.py [--quick] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from typing import Any

import trio
from benchlib import BODY, Proc, consume_backlog, free_port, stop_all

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.auth_admin import AuthAdmin, acl_body
from rocketrio.actors.client.config import ClientConfig, ProducerConfig
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.observe.logs import configure_logging
from rocketrio.protocol.acl_signature import RequestSigner, SessionCredentials
from rocketrio.protocol.auth_bodies import UserInfo

ROOT = SessionCredentials("root", "root-secret")
ALICE = SessionCredentials("alice", "alice-secret")


def client_config(creds: SessionCredentials | None) -> ClientConfig:
    if creds is None:
        return ClientConfig()
    return ClientConfig(accessKey=creds.access_key, secretKey=creds.secret_key)


async def setup(ns: str, open_addr: str, auth_addr: str) -> None:
    for addr, hook in ((open_addr, None), (auth_addr, RequestSigner(ROOT))):
        async with MQAdmin(ns, request_hook=hook) as admin:
            for _ in range(100):
                try:
                    await admin.update_topic("BenchTopic", broker_addr=addr, read_queues=4,
                                             write_queues=4)  # fmt: skip
                    break
                except Exception:
                    await trio.sleep(0.2)
            else:
                raise RuntimeError(f"broker {addr} did not come up")
            if hook is not None:
                auth = AuthAdmin(admin)
                await auth.create_user([addr], UserInfo("alice", "alice-secret"))
                acl = acl_body("User:alice", ["Topic:BenchTopic"], ["Pub", "Sub"])
                await auth.create_acl([addr], acl)
                for group in ("bench_c0", "bench_c1", "bench_c2", "bench_c3", "bench_c4"):
                    await auth.create_acl([addr], acl_body("User:alice", [f"Group:{group}"],
                                                           ["Sub"]))  # fmt: skip


async def wait_writable(ns: str, creds: SessionCredentials | None) -> None:
    deadline = time.monotonic() + 30
    async with Producer("warm", ns, client_config=client_config(creds)) as p:
        while True:
            try:
                await p.send(Message("BenchTopic", b"warmup"))
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await trio.sleep(0.1)


async def single_sends(ns: str, creds: SessionCredentials | None, total: int) -> float:
    cfg = ProducerConfig(producerGroup="bench_p", maxInFlight=256)
    async with Producer("bench_p", ns, config=cfg, client_config=client_config(creds)) as p:
        t0 = time.perf_counter()
        futs = [await p.send_async(Message("BenchTopic", BODY)) for _ in range(total)]
        for f in futs:
            await f.wait()
        return total / (time.perf_counter() - t0)


def per_request_costs(n: int = 20_000) -> dict[str, float]:
    """Microseconds to sign one send, and for the broker's gate to pass it."""
    from rocketrio.actors.auth.gate import GateSettings, check_request
    from rocketrio.actors.auth.metadata import AuthMetadata
    from rocketrio.protocol.acl_signature import sign
    from rocketrio.protocol.remoting import RemotingCommand

    table = AuthMetadata()
    table.create_user(UserInfo("alice", "alice-secret"), None)
    table.put_acl(acl_body("User:alice", ["Topic:BenchTopic"], ["Pub", "Sub"]), None)
    ext = {k: "12345" for k in "acdefghjkmn"} | {"b": "BenchTopic", "i": "UNIQ_KEY\x01" + "A" * 32}

    def signed() -> RemotingCommand:
        cmd = RemotingCommand(310, ext_fields=dict(ext), body=BODY)
        sign(cmd, ALICE)
        return cmd

    cmd = signed()
    settings = GateSettings(True, True, cluster="DefaultCluster", node="bench")
    assert check_request(cmd, "127.0.0.1", settings, table.user, table.acl) is None
    t0 = time.perf_counter()
    for _ in range(n):
        signed()
    t1 = time.perf_counter()
    for _ in range(n):
        check_request(cmd, "127.0.0.1", settings, table.user, table.acl)
    t2 = time.perf_counter()
    return {"sign_us": round((t1 - t0) / n * 1e6, 1), "gate_us": round((t2 - t1) / n * 1e6, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller counts (a smoke run)")
    ap.add_argument("--rounds", type=int, default=3, help="open/auth pairs (max 5)")
    args = ap.parse_args()
    n = 5_000 if args.quick else 30_000
    rounds = max(1, min(args.rounds, 5))
    configure_logging("bench", "bench", None, console=None)
    work = tempfile.mkdtemp(prefix="rocketrio-bench-auth-")
    procs: list[Proc] = []
    result: dict[str, Any] = {"bench": "auth", "body_bytes": len(BODY), "messages": n}
    try:
        taken: set[int] = set()
        ns_port = free_port(taken)
        ns = {"open": f"127.0.0.1:{free_port(taken)}", "auth": f"127.0.0.1:{ns_port}"}
        # one NameServer per broker: each cluster's topic route names only its own broker
        for side, addr in ns.items():
            procs.append(Proc("namesrv", f"ns-{side}", {
                "listenPort": addr.rsplit(":", 1)[1], "logDir": work}, work).start())  # fmt: skip
        time.sleep(0.5)
        brokers: dict[str, str] = {}
        for side in ("open", "auth"):
            port = free_port(taken)
            brokers[side] = f"127.0.0.1:{port}"
            conf = {
                "namesrvAddr": ns[side], "logDir": work, "brokerIP1": "127.0.0.1",
                "brokerName": f"bench-{side}", "listenPort": str(port),
                "storePathRootDir": os.path.join(work, side),
            }  # fmt: skip
            if side == "auth":
                conf.update(
                    authenticationEnabled="true",
                    authorizationEnabled="true",
                    initAuthenticationUser='{"username":"root","password":"root-secret"}',
                )
            procs.append(Proc("broker", f"bench-{side}", conf, work).start())
        trio.run(setup, ns["open"], brokers["open"], brokers["auth"])
        creds = {"open": None, "auth": ALICE}
        for side in ("open", "auth"):
            trio.run(wait_writable, ns[side], creds[side])
        rows: dict[str, dict[str, list[float]]] = {
            s: {"produce": [], "consume": []} for s in ("open", "auth")
        }
        for r in range(rounds):
            order = ("open", "auth") if r % 2 == 0 else ("auth", "open")
            for side in order:
                rows[side]["produce"].append(trio.run(single_sends, ns[side], creds[side], n))
            for side in order:
                rate = trio.run(
                    consume_backlog,
                    ns[side],
                    "BenchTopic",
                    f"bench_c{r}",
                    n * (r + 1),
                    client_config(creds[side]),
                )
                rows[side]["consume"].append(rate)
        for side, figs in rows.items():
            for what, values in figs.items():
                result[f"{side}_{what}_msgs_per_s"] = [round(v) for v in values]
                result[f"{side}_{what}_median"] = round(statistics.median(values))
        result.update(per_request_costs())
        for what in ("produce", "consume"):
            result[f"{what}_auth_vs_open"] = round(
                result[f"auth_{what}_median"] / result[f"open_{what}_median"], 3
            )
    finally:
        stop_all(procs, work)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
