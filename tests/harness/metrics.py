"""Reading Prometheus figures in tests: scrape an exporter on the simulated network, collect a
collector's samples in-process, and pick one sample by name and labels."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from tests.harness.sim_network import SimNetwork


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def one(
    got: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    hits = [v for (n, ls), v in got.items() if n == name and labels.items() <= dict(ls).items()]
    assert len(hits) == 1, (name, labels, hits)
    return hits[0]


GET = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"


CLIENT = "10.0.9.1"


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(net: SimNetwork, addr: str) -> Samples:
    stream = await net.transport(CLIENT).connect(addr)
    async with stream:
        await stream.send_all(GET)
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), head
    assert b"Content-Type: text/plain; version=" in head
    return samples(body.decode())


def collect(*collectors: Collector) -> Samples:
    """Every sample the collectors give, by (name, sorted labels)."""
    registry = CollectorRegistry(auto_describe=False)
    for c in collectors:
        registry.register(c)
    out: Samples = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def pick(got: Samples, name: str, **labels: str) -> float:
    """The one sample named `name` whose labels include `labels`."""
    hits = [v for (n, ls), v in got.items() if n == name and labels.items() <= dict(ls).items()]
    assert len(hits) == 1, (name, labels, hits)
    return hits[0]
