"""Local mode's pure parts: each broker set's queues point at the proxy next to its master
(host of the master, that proxy's port), a broker's config says whether it runs a proxy, sends
prefer the co-located broker, the port lookups are cached and a failed one falls back; the
in-process stream is a conforming Trio stream; the launcher reads enableProxy / --enable-proxy
and the proxy's config file with clear errors; `up --proxy-mode local` plans a proxy per broker."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

import pytest
import structlog
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.actors.proxy import mapping as mp
from rocketrio.actors.proxy.in_process import in_process_stream_pair
from rocketrio.actors.proxy.local import LocalProxyEndpoints, proxy_config_of
from rocketrio.actors.proxy.mapping import TargetQueue
from rocketrio.actors.proxy.service import ProxyConfig
from rocketrio.cli.main import broker_config, build_parser, proxy_config
from rocketrio.cli.up_plan import Layout, PlanError, plan, with_local_proxies
from rocketrio.protocol.bodies import BrokerData, QueueData, TopicRouteData
from rocketrio.protocol.config import ConfigError
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb

OWN = mp.endpoints_of("10.0.0.9", 8081)
TOPIC = pb.Resource(name="T")


def route() -> TopicRouteData:
    """Sets a (master 10.0.1.1), b (master 10.0.1.2, a slave elsewhere), c (no master)."""
    return TopicRouteData(
        [QueueData(n, 2, 2, 6) for n in ("a", "b", "c")],
        [
            BrokerData("C", "a", {0: "10.0.1.1:10911"}),
            BrokerData("C", "b", {0: "10.0.1.2:10921", 1: "10.0.1.7:10931"}),
            BrokerData("C", "c", {1: "10.0.1.3:10911"}),
        ],
    )


def addr_of(q: pb.MessageQueue) -> tuple[str, int]:
    [a] = q.broker.endpoints.addresses
    return a.host, a.port


def test_each_queue_points_at_the_proxy_next_to_its_master() -> None:
    ports = {"10.0.1.1:10911": 8081, "10.0.1.2:10921": 8091}
    per_broker = mp.local_endpoints(route(), ports)
    queues = mp.route_queues(route(), TOPIC, OWN, per_broker)
    got = {(q.broker.name, addr_of(q)) for q in queues}
    assert got == {("a", ("10.0.1.1", 8081)), ("b", ("10.0.1.2", 8091))}
    assigned = mp.assignments(route(), TOPIC, OWN, per_broker)
    assert [(a.message_queue.broker.name, addr_of(a.message_queue)) for a in assigned] == [
        ("a", ("10.0.1.1", 8081)),
        ("b", ("10.0.1.2", 8091)),
    ]


def test_a_master_without_a_proxy_keeps_the_asking_proxys_endpoints() -> None:
    per_broker = mp.local_endpoints(route(), {"10.0.1.1:10911": 8081, "10.0.1.2:10921": None})
    assert set(per_broker) == {"a"}
    queues = mp.route_queues(route(), TOPIC, OWN, per_broker)
    assert {addr_of(q) for q in queues if q.broker.name == "b"} == {("10.0.0.9", 8081)}


def test_cluster_mode_gives_its_own_endpoints_for_every_queue() -> None:
    queues = mp.route_queues(route(), TOPIC, OWN)
    assert {addr_of(q) for q in queues} == {("10.0.0.9", 8081)}


@pytest.mark.parametrize(
    ("config", "port"),
    [
        ({"enableProxy": "true", "grpcServerPort": "8091"}, 8091),
        ({"enableProxy": "TRUE"}, 8081),  # upstream's default port
        ({"enableProxy": "false", "grpcServerPort": "8091"}, None),
        ({}, None),  # an older broker: no proxy
        ({"enableProxy": "true", "grpcServerPort": "0"}, None),  # an ephemeral port: unknown
        ({"enableProxy": "true", "grpcServerPort": "x"}, None),
    ],
)
def test_a_brokers_config_says_where_its_proxy_is(config: dict[str, str], port: int) -> None:
    assert mp.local_proxy_port(config) == port


def test_sends_prefer_the_co_located_broker_when_it_has_queues() -> None:
    queues = mp.writable_queues(route())
    assert mp.prefer_broker(queues, "b") == [TargetQueue("b", 0), TargetQueue("b", 1)]
    assert mp.prefer_broker(queues, "z") == queues  # the topic is not on this broker


def test_local_proxy_settings_come_from_the_broker() -> None:
    cfg = proxy_config_of(
        BrokerConfig(
            brokerName="broker-b",
            brokerIP1="10.0.1.2",
            namesrvAddr="10.0.0.1:9876",
            enableProxy=True,
            grpcServerPort=8091,
            authenticationEnabled=True,
            innerClientAuthenticationCredentials='{"accessKey":"ak","secretKey":"sk"}',
        )
    )
    assert (cfg.namesrv_addr, cfg.grpc_port, cfg.host) == ("10.0.0.1:9876", 8091, "10.0.1.2")
    assert cfg.local_broker_name == "broker-b" and cfg.authentication_enabled
    assert (cfg.access_key, cfg.secret_key) == ("ak", "sk")


class Fetches:
    """A GET_BROKER_CONFIG stand-in that counts calls and can fail."""

    def __init__(self, answers: dict[str, dict[str, str]]) -> None:
        self.answers = answers
        self.calls: list[str] = []
        self.fail = False

    async def __call__(self, addr: str) -> Mapping[str, str]:
        self.calls.append(addr)
        await trio.sleep(0.001)
        if self.fail:
            raise RemotingError(f"cannot connect to {addr}")
        return self.answers[addr]


async def test_port_lookups_are_cached_and_a_failure_falls_back_uncached(
    mock_clock: trio.testing.MockClock,
) -> None:
    fetch = Fetches({"10.0.1.2:10921": {"enableProxy": "true", "grpcServerPort": "8091"}})
    cfg = ProxyConfig(namesrv_addr="ns:9876", grpc_port=8081, host="10.0.1.1")
    ends = LocalProxyEndpoints("10.0.1.1:10911", cfg, fetch, ttl_s=30)
    got = await ends(route())
    assert {n: e.addresses[0].port for n, e in got.items()} == {"a": 8081, "b": 8091}
    assert fetch.calls == ["10.0.1.2:10921"]  # never asks its own broker
    await ends(route())
    assert len(fetch.calls) == 1  # cached
    await trio.sleep(31)
    fetch.fail = True
    with structlog.testing.capture_logs() as logs:
        got = await ends(route())
    assert set(got) == {"a"}  # b's queues: this proxy's endpoints, it forwards
    assert [e["event"] for e in logs] == ["proxy_endpoint_lookup_failed"]
    fetch.fail = False
    assert set(await ends(route())) == {"a", "b"}  # the failure was not cached
    assert len(fetch.calls) == 3


async def test_in_process_stream_is_a_conforming_trio_stream() -> None:
    async def pair() -> tuple[trio.abc.HalfCloseableStream, trio.abc.HalfCloseableStream]:
        return in_process_stream_pair()

    await trio.testing.check_half_closeable_stream(pair, None)


async def test_in_process_stream_writer_waits_for_its_reader() -> None:
    a, b = in_process_stream_pair(capacity=2)
    await a.send_all(b"1")
    await a.send_all(b"2")
    with trio.move_on_after(1) as scope:
        await a.send_all(b"3")
    assert scope.cancelled_caught  # bounded: a full pipe blocks the writer
    assert await b.receive_some(1) == b"1"
    await a.send_all(b"3")


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_enable_proxy_flag_and_key(tmp_path: Path) -> None:
    conf = tmp_path / "b.conf"
    conf.write_text("brokerName=broker-a\nnamesrvAddr=127.0.0.1:9876\n")
    cfg = broker_config(parse("broker", "-c", str(conf)))
    assert not cfg.enableProxy and cfg.grpcServerPort == 8081
    cfg = broker_config(parse("broker", "-c", str(conf), "--enable-proxy"))
    assert cfg.enableProxy
    conf.write_text("namesrvAddr=127.0.0.1:9876\nenableProxy=true\ngrpcServerPort=8091\n")
    cfg = broker_config(parse("broker", "-c", str(conf)))
    assert cfg.enableProxy and cfg.grpcServerPort == 8091


def test_enable_proxy_without_a_namesrv_is_a_config_error(tmp_path: Path) -> None:
    conf = tmp_path / "b.conf"
    conf.write_text("brokerName=broker-a\n")
    with pytest.raises(ConfigError, match="enableProxy needs namesrvAddr"):
        broker_config(parse("broker", "-c", str(conf), "--enable-proxy"))
    conf.write_text("namesrvAddr=n:1\ngrpcServerPort=-1\n")
    with pytest.raises(ConfigError, match="grpcServerPort"):
        broker_config(parse("broker", "-c", str(conf)))


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("namesrvAddr=n:1\ngrpcPort=1\n", "unknown proxy key.*grpcPort"),
        ("namesrvAddr=n:1\nproxyMode=LOCAL\n", "broker --enable-proxy"),
        ("namesrvAddr=n:1\ngrpcServerPort=80x\n", "grpcServerPort"),
        ("namesrvAddr=n:1\nauthenticationEnabled=yes\n", "authenticationEnabled"),
        ("grpcServerPort=8081\n", "needs -n NAMESRV"),
    ],
)
def test_proxy_config_errors_name_the_key(tmp_path: Path, text: str, error: str) -> None:
    conf = tmp_path / "proxy.conf"
    conf.write_text(text)
    with pytest.raises(ConfigError, match=error):
        proxy_config(parse("proxy", "-c", str(conf)))


def test_proxy_flags_override_its_file(tmp_path: Path) -> None:
    conf = tmp_path / "proxy.conf"
    conf.write_text("proxyMode=cluster\nnamesrvAddr=n:1\ngrpcServerPort=9000\nlogDir=/l\n")
    cfg, log_dir = proxy_config(parse("proxy", "-c", str(conf), "--grpc-port", "9100"))
    assert (cfg.namesrv_addr, cfg.grpc_port, log_dir) == ("n:1", 9100, "/l")


def test_up_local_mode_gives_every_broker_its_own_proxy_port(tmp_path: Path) -> None:
    specs = with_local_proxies(plan("2m-noslave", Layout("/b")), 8081)
    brokers = {s.name: s for s in specs if s.role == "broker"}
    assert {n: s.config["grpcServerPort"] for n, s in brokers.items()} == {
        "broker-a": "8081",
        "broker-b": "8082",
    }
    for s in brokers.values():
        path = tmp_path / f"{s.name}.conf"
        path.write_text(s.text)
        cfg = broker_config(parse("broker", "-c", str(path)))  # as the launcher reads it
        assert cfg.enableProxy and str(cfg.grpcServerPort) == s.config["grpcServerPort"]
        assert any(u.what == "grpcServerPort" for u in s.listens)  # checked for being free
    with pytest.raises(PlanError, match="grpcServerPort"):
        with_local_proxies(plan("2m-noslave", Layout("/b", namesrv_port=9000)), 8999)
