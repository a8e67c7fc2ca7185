"""The broker container's pure parts: brokerConfigPaths parsing, broker identities, and the
registry's add/remove validation (actors/broker/container/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from rocketrio.actors.broker.boot.config import BrokerConfig, BrokerRole
from rocketrio.actors.broker.container.config import join_config_paths, parse_config_paths
from rocketrio.actors.broker.container.registry import (
    BrokerIdentity,
    ContainerError,
    ContainerRegistry,
    Member,
    UnknownBroker,
)
from rocketrio.actors.observe.metrics_exporter import MetricsExporterType
from rocketrio.cli.main import build_parser, container_config
from rocketrio.protocol.config import ConfigError

CONTAINER_PORT = 10811


class _Writer:
    """A stand-in for a store writer: the registry only keeps it."""


def _cfg(name: str = "broker-a", **kw: Any) -> BrokerConfig:
    values: dict[str, Any] = {"brokerName": name, "storePathRootDir": f"/data/{name}"}
    values.update(kw)
    return BrokerConfig(**values)


def _join(reg: ContainerRegistry, cfg: BrokerConfig, path: str = "x.conf") -> Member:
    identity = reg.check_add(cfg, path)
    member = Member(identity, path, cfg, _Writer())  # type: ignore[arg-type]
    reg.add(member)
    return member


# ---------------------------------------------------------------- brokerConfigPaths


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("", []),
        ("  ", []),
        ("a.conf", ["a.conf"]),
        ("a.conf:b.conf", ["a.conf", "b.conf"]),
        (" /etc/a.conf : b.conf ", ["/etc/a.conf", "b.conf"]),
    ],
)
def test_config_paths_parse(text: str, want: list[str]) -> None:
    assert parse_config_paths(text) == want
    assert parse_config_paths(join_config_paths(want)) == want


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("a.conf::b.conf", "entry 2 of 'a.conf::b.conf' is empty"),
        ("a.conf:", "entry 2 of 'a.conf:' is empty"),
        ("a.conf:b.conf:a.conf", "a.conf is named twice"),
    ],
)
def test_config_paths_refused(text: str, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        parse_config_paths(text, "c.conf: brokerConfigPaths")


# ---------------------------------------------------------------- identities


def test_identity_parse_and_canonical_name() -> None:
    who = BrokerIdentity.parse("DefaultCluster:broker-a:1")
    assert who == BrokerIdentity("DefaultCluster", "broker-a", 1)
    assert who.canonical_name == "DefaultCluster_broker-a_1"
    assert BrokerIdentity.of(_cfg(brokerId=1, brokerRole=BrokerRole.SLAVE)) == who


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("DefaultCluster:broker-a", "expected clusterName:brokerName:brokerId"),
        ("DefaultCluster::0", "expected clusterName:brokerName:brokerId"),
        ("c:b:x", "brokerId 'x' is not a number"),
        ("c:b:-1", "can't be negative"),
    ],
)
def test_identity_parse_refused(text: str, error: str) -> None:
    with pytest.raises(ContainerError, match=error):
        BrokerIdentity.parse(text)


# ---------------------------------------------------------------- add


def test_members_in_order_and_peek_master() -> None:
    reg = ContainerRegistry(CONTAINER_PORT)
    slave = _join(
        reg, _cfg("broker-b", brokerId=1, brokerRole=BrokerRole.SLAVE, listenPort=10921), "b.conf"
    )
    assert reg.peek_master() is None  # a slave is never the in-process escape target
    master = _join(reg, _cfg("broker-a", listenPort=10911), "a.conf")
    assert [m.identity for m in reg.members()] == [slave.identity, master.identity]
    assert reg.peek_master() is master
    # a master that boots or waits for its restart is no escape target
    reg.add(attrs.evolve(master, serving=False))
    assert reg.peek_master() is None
    assert [m.identity for m in reg.members()] == [slave.identity, master.identity]  # same place
    reg.add(master)
    assert reg.config_paths() == ["b.conf", "a.conf"]
    assert master.addr == "127.0.0.1:10911"


def test_duplicate_broker_refused() -> None:
    reg = ContainerRegistry(CONTAINER_PORT)
    _join(reg, _cfg(listenPort=10911), "a.conf")
    dup = _cfg(listenPort=20911, storePathRootDir="/data/other")
    with pytest.raises(ContainerError, match=r"DefaultCluster_broker-a_0 has already been added"):
        reg.check_add(dup, "a2.conf")
    # the same name in another cluster is another broker
    _join(reg, _cfg(brokerClusterName="Other", listenPort=20911, storePathRootDir="/d/o"))


@pytest.mark.parametrize(
    ("kw", "error"),
    [
        ({"brokerRole": BrokerRole.SLAVE, "brokerId": 0}, "slave broker id must be > 0"),
        ({"brokerRole": BrokerRole.ASYNC_MASTER, "brokerId": 2}, "needs brokerId=0 \\(got 2\\)"),
        ({"brokerRole": BrokerRole.SYNC_MASTER, "brokerId": 1}, "needs brokerId=0"),
        ({"inSyncReplicas": 1, "minInSyncReplicas": 2}, "invalid replicas number"),
        ({"enableProxy": True, "namesrvAddr": "n:9876"}, "enableProxy"),
        ({"listenPort": CONTAINER_PORT}, "listenPort 10811 is the container's listenPort"),
        ({"listenPort": 10810}, "haListenPort 10811 is the container's listenPort"),
        ({"listenPort": 10911, "haListenPort": 10911}, "haListenPort 10911 is also its listenPort"),
    ],
)
def test_bad_broker_refused(kw: dict[str, Any], error: str) -> None:
    reg = ContainerRegistry(CONTAINER_PORT)
    with pytest.raises(ContainerError, match=error):
        reg.check_add(_cfg(**kw), "a.conf")
    assert reg.members() == []


def test_controller_mode_ids_not_checked() -> None:
    """In controller mode the controller assigns roles: any id may join as either."""
    reg = ContainerRegistry(CONTAINER_PORT)
    _join(reg, _cfg(enableControllerMode=True, brokerId=3, controllerAddr="c:9878"))


@pytest.mark.parametrize(
    ("kw", "error"),
    [
        ({"listenPort": 10911}, "listenPort 10911 is already DefaultCluster_broker-a_0.s listenP"),
        ({"listenPort": 10912}, "listenPort 10912 is already DefaultCluster_broker-a_0's haListen"),
        (
            {"listenPort": 10950, "haListenPort": 10911},
            "haListenPort 10911 is already DefaultCluster_broker-a_0's listenPort",
        ),
        ({"listenPort": 10910}, "haListenPort 10911 is already"),
        (
            {"listenPort": 10950, "metricsExporterType": MetricsExporterType.PROM,
             "metricsPromExporterPort": 5557},
            "metricsPromExporterPort 5557 is already DefaultCluster_broker-a_0's metricsProm",
        ),
        (
            {"listenPort": 10950, "storePathRootDir": "/data/x/../broker-a"},
            "storePathRootDir /data/x/../broker-a is already DefaultCluster_broker-a_0's store",
        ),
    ],
)  # fmt: skip
def test_clash_with_a_member_refused(kw: dict[str, Any], error: str) -> None:
    reg = ContainerRegistry(CONTAINER_PORT)
    _join(
        reg,
        _cfg(
            listenPort=10911,
            metricsExporterType=MetricsExporterType.PROM,
            metricsPromExporterPort=5557,
        ),
    )
    with pytest.raises(ContainerError, match=error):
        reg.check_add(_cfg("broker-b", **kw), "b.conf")
    assert len(reg.members()) == 1


def test_prom_port_only_counts_when_exported() -> None:
    reg = ContainerRegistry(CONTAINER_PORT)
    _join(reg, _cfg(listenPort=10911))  # metrics off: its metricsPromExporterPort is unused
    _join(reg, _cfg("broker-b", listenPort=10921, metricsPromExporterPort=5557))


# ---------------------------------------------------------------- remove


def test_remove_known_and_unknown() -> None:
    reg = ContainerRegistry(CONTAINER_PORT)
    a = _join(reg, _cfg(listenPort=10911))
    with pytest.raises(UnknownBroker, match="DefaultCluster_broker-b_0 is not in this container"):
        reg.remove(BrokerIdentity("DefaultCluster", "broker-b", 0))
    assert reg.remove(a.identity) is a
    assert reg.members() == [] and reg.peek_master() is None
    # its ports and store are free again
    _join(reg, _cfg(listenPort=10911))


# ---------------------------------------------------------------- `rocketrio container` config


def test_container_command_config(tmp_path: Path) -> None:
    """`rocketrio container`: the file's brokerConfigPaths relative to the file, `-b` and `-n`
    from the command line, and a bad member file a config error before anything starts."""
    (tmp_path / "a.conf").write_text("brokerName=broker-a\n")
    (tmp_path / "bad.conf").write_text("brokerName=broker-z\nnoSuchKey=1\n")
    conf = tmp_path / "c.conf"
    conf.write_text("listenPort=10951\nbrokerConfigPaths=a.conf\n")
    parser = build_parser()
    cfg = container_config(parser.parse_args(["container", "-c", str(conf), "-n", "h:9876"]))
    assert cfg.brokerConfigPaths == str(tmp_path / "a.conf")
    assert (cfg.listenPort, cfg.namesrvAddr) == (10951, "h:9876")
    bad = str(tmp_path / "bad.conf")
    with pytest.raises(ConfigError, match=r"bad\.conf: unknown key noSuchKey"):
        container_config(parser.parse_args(["container", "-c", str(conf), "-b", bad]))
    with pytest.raises(ConfigError, match="entry 2 of"):
        container_config(parser.parse_args(["container", "-b", "a.conf::b.conf"]))
    with pytest.raises(ConfigError, match="cannot read config file"):
        container_config(parser.parse_args(["container", "-b", str(tmp_path / "none.conf")]))
