"""Config loading (upstream key=value files), deploy/ configs, and the package layout."""

from __future__ import annotations

import glob
import os
import tomllib

import pytest

from rocketrio.actors.broker.boot.config import BrokerConfig, FlushDiskType
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.protocol.config import ConfigError, load_config, parse_properties
from tests.harness.paths import REPO

ROOT = str(REPO)


def _role_of(path: str) -> type:
    name = os.path.basename(path)
    if name.startswith("namesrv"):
        return NamesrvConfig
    if name.startswith("broker"):
        return BrokerConfig
    raise AssertionError(f"no config class for {path}")


@pytest.mark.parametrize(
    "path",
    sorted(
        p
        for mode in ("single", "2m-noslave", "2m-2s-async", "2m-2s-sync")
        for p in glob.glob(os.path.join(ROOT, "deploy", mode, "*.conf"))
    ),
)
def test_every_deploy_config_loads(path: str) -> None:
    cfg = load_config(_role_of(path), path)
    assert cfg is not None


def test_deploy_dirs_exist() -> None:
    for mode in ("single", "2m-noslave", "2m-2s-async", "2m-2s-sync"):
        assert glob.glob(os.path.join(ROOT, "deploy", mode, "*.conf")), mode


@pytest.mark.parametrize(
    ("mode", "master_role"), [("async", "ASYNC_MASTER"), ("sync", "SYNC_MASTER")]
)
def test_2m_2s_pairs(mode: str, master_role: str) -> None:
    """Two pairs per mode: a master (id 0) and a slave (id >= 1) per brokerName, every process
    on its own ports and store."""
    paths = sorted(glob.glob(os.path.join(ROOT, "deploy", f"2m-2s-{mode}", "broker-*.conf")))
    configs = [load_config(BrokerConfig, p) for p in paths]
    roles = {(c.brokerName, c.brokerId): c.brokerRole.value for c in configs}
    assert roles == {
        ("broker-a", 0): master_role, ("broker-a", 1): "SLAVE",
        ("broker-b", 0): master_role, ("broker-b", 1): "SLAVE",
    }  # fmt: skip
    for attr in ("listenPort", "ha_listen_port", "storePathRootDir"):
        values = [getattr(c, attr) for c in configs]
        assert len(set(values)) == len(values), attr
    assert not ({c.listenPort for c in configs} & {c.ha_listen_port for c in configs})


def test_properties_parsing_and_errors(tmp_path: os.PathLike[str]) -> None:
    assert parse_properties("# c\n! c2\na=1\nb: two\n c = x=y \n") == {
        "a": "1",
        "b": "two",
        "c": "x=y",
    }
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_properties("novalue\n", "f.conf")
    p = os.path.join(tmp_path, "b.conf")
    with open(p, "w") as f:
        f.write("brokerName=x\nflushDiskType=SYNC_FLUSH\n")
    assert load_config(BrokerConfig, p).flushDiskType is FlushDiskType.SYNC_FLUSH
    with open(p, "w") as f:
        f.write("brokerNme=x\n")
    with pytest.raises(ConfigError, match=r"b\.conf: unknown key brokerNme"):
        load_config(BrokerConfig, p)
    with open(p, "w") as f:
        f.write("listenPort=ten\n")
    with pytest.raises(ConfigError, match="listenPort"):
        load_config(BrokerConfig, p)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(BrokerConfig, os.path.join(tmp_path, "missing.conf"))


def test_pyproject_lists_every_package() -> None:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        tool = tomllib.load(f)["tool"]["setuptools"]
    listed = set(tool["packages"])
    found = set()
    for top in {d.split("/")[0] for d in tool["package-dir"].values()}:  # client/ too
        for init in glob.glob(os.path.join(ROOT, top, "**", "__init__.py"), recursive=True):
            rel = os.path.relpath(os.path.dirname(init), ROOT)
            found.add("rocketrio." + rel.replace(os.sep, "."))
    assert found == listed
    for pkg in listed:
        assert tool["package-dir"][pkg] == pkg.removeprefix("rocketrio.").replace(".", "/")
