"""The live-config decision (actors/kernel/live_update.py), the per-role key classification
(actors/{broker,namesrv,controller}/live_config.py) and the config-file edit
(storage/properties_file.py): pure, no server."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.auth.model import Action
from rocketrio.actors.auth.rights import rights_of
from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.boot.live_config import BROKER_POLICY, registered_topics
from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.controller.live_config import CONTROLLER_POLICY
from rocketrio.actors.kernel.live_update import (
    BLACK_LIST_REMARK,
    ConfigApplied,
    ConfigRefused,
    UpdatePolicy,
    parse_update_body,
    plan_update,
)
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.namesrv.live_config import NAMESRV_POLICY
from rocketrio.protocol.bodies import TopicConfig, TopicConfigSerializeWrapper
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.config import parse_properties
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.storage.properties_file import merge_properties, update_properties_file

ROLES = [
    (BrokerConfig, BROKER_POLICY),
    (NamesrvConfig, NAMESRV_POLICY),
    (ControllerConfig, CONTROLLER_POLICY),
]


def _fields(cls: type) -> set[str]:
    return {a.name for a in attrs.fields(cls)}


def plan(policy: UpdatePolicy, cfg: object, **values: str) -> ConfigApplied[object] | ConfigRefused:
    return plan_update(policy, cfg, values)


# --- classification ---------------------------------------------------------------------------


@pytest.mark.parametrize(("cls", "policy"), ROLES)
def test_every_live_and_black_key_is_a_real_key(cls: type, policy: UpdatePolicy) -> None:
    fields = _fields(cls)
    assert policy.live_keys <= fields
    assert not policy.live_keys & policy.black_list(cls())


@pytest.mark.parametrize(
    "key",
    [
        "listenPort",
        "storePathRootDir",
        "brokerName",
        "brokerClusterName",
        "brokerId",
        "enableControllerMode",
        "haListenPort",
        "brokerIP1",
        "brokerRole",
        "namesrvAddr",
        "mappedFileSizeCommitLog",
        "authenticationEnabled",
        "serverMaxConnections",
    ],
)
def test_broker_keys_read_at_start_are_refused_as_needing_a_restart(key: str) -> None:
    cfg = BrokerConfig()
    raw = str(getattr(cfg, key)).lower() if isinstance(getattr(cfg, key), bool) else "1"
    out = plan(BROKER_POLICY, cfg, **{key: raw})
    assert isinstance(out, ConfigRefused)
    assert out.code == ResponseCode.INVALID_PARAMETER
    assert f"{key} needs a broker restart" in out.remark


@pytest.mark.parametrize(
    ("key", "value", "typed"),
    [
        ("brokerPermission", "4", 4),
        ("autoCreateTopicEnable", "false", False),
        ("maxMessageSize", "1024", 1024),
        ("flushIntervalCommitLog", "200", 200),
        ("longPollingEnable", "false", False),
        ("maxHeldPulls", "10", 10),
        ("registerNameServerPeriod", "5000", 5000),
    ],
)
def test_broker_live_keys_are_applied_typed(key: str, value: str, typed: object) -> None:
    cfg = BrokerConfig()
    out = plan(BROKER_POLICY, cfg, **{key: value})
    assert isinstance(out, ConfigApplied)
    assert getattr(out.config, key) == typed
    assert [c.key for c in out.changes] == [key]
    assert out.updates == {key: value}
    assert getattr(cfg, key) != typed  # the decision does not touch the running config


@pytest.mark.parametrize(("cls", "policy"), ROLES)
def test_black_listed_keys_answer_upstreams_code_and_remark(
    cls: type, policy: UpdatePolicy
) -> None:
    for key in sorted(policy.black_list(cls())):
        out = plan(policy, cls(), **{key: "x"})
        assert isinstance(out, ConfigRefused)
        assert out.code == ResponseCode.NO_PERMISSION
        assert out.remark.startswith(BLACK_LIST_REMARK)
        assert key in out.remark


def test_upstream_black_lists() -> None:
    assert BROKER_POLICY.black_list(BrokerConfig()) == {
        "brokerConfigPath",
        "rocketmqHome",
        "configBlackList",
    }
    assert NAMESRV_POLICY.black_list(NamesrvConfig()) == {
        "configBlackList",
        "configStorePath",
        "kvConfigPath",
        "rocketmqHome",
    }
    assert CONTROLLER_POLICY.black_list(ControllerConfig()) == {
        "configBlackList",
        "configStorePath",
        "rocketmqHome",
    }
    # configBlackList adds keys; a live key listed there is refused too
    cfg = BrokerConfig(configBlackList="maxMessageSize")
    out = plan(BROKER_POLICY, cfg, maxMessageSize="1024")
    assert isinstance(out, ConfigRefused) and out.code == ResponseCode.NO_PERMISSION


def test_unknown_bad_and_restart_keys_are_all_named_and_nothing_applies() -> None:
    out = plan(
        BROKER_POLICY,
        BrokerConfig(),
        maxMessageSize="1024",  # fine on its own
        maxmessagesize="1",
        listenPort="1",
        flushIntervalCommitLog="soon",
    )
    assert isinstance(out, ConfigRefused)
    assert out.code == ResponseCode.INVALID_PARAMETER
    r = out.remark
    assert r.startswith("nothing was changed: ")
    assert "unknown key maxmessagesize (did you mean maxMessageSize?)" in r
    assert "listenPort needs a broker restart" in r
    assert "bad value for flushIntervalCommitLog='soon'" in r
    assert "maxMessageSize=" not in r  # the fine key is not a problem, just not applied


@pytest.mark.parametrize("perm", ["-1", "8", "14"])
def test_broker_permission_must_be_perm_bits(perm: str) -> None:
    out = plan(BROKER_POLICY, BrokerConfig(), brokerPermission=perm)
    assert isinstance(out, ConfigRefused)
    assert "brokerPermission must be a perm" in out.remark


def test_validators_of_the_config_class_refuse_a_bad_live_value() -> None:
    out = plan(BROKER_POLICY, BrokerConfig(), maxMessageSize="0")
    assert isinstance(out, ConfigRefused)
    assert "maxMessageSize must be > 0" in out.remark


def test_same_value_is_no_change() -> None:
    out = plan(BROKER_POLICY, BrokerConfig(), maxMessageSize=str(4 * 1024 * 1024))
    assert isinstance(out, ConfigApplied) and out.changes == ()


def test_namesrv_and_controller_live_keys() -> None:
    ok = plan(NAMESRV_POLICY, NamesrvConfig(), enableAllTopicList="false")
    assert isinstance(ok, ConfigApplied) and ok.config.enableAllTopicList is False
    no = plan(NAMESRV_POLICY, NamesrvConfig(), listenPort="1")
    assert isinstance(no, ConfigRefused) and "listenPort needs a name server restart" in no.remark
    ok2 = plan(CONTROLLER_POLICY, ControllerConfig(), enableElectUncleanMaster="true")
    assert isinstance(ok2, ConfigApplied) and ok2.config.enableElectUncleanMaster is True
    no2 = plan(CONTROLLER_POLICY, ControllerConfig(), controllerDLegerPeers="n0-h:1")
    assert isinstance(no2, ConfigRefused)
    assert "controllerDLegerPeers needs a controller restart" in no2.remark


# --- body parsing ------------------------------------------------------------------------------


def test_body_is_properties_text() -> None:
    assert parse_update_body(b"maxMessageSize=1024\nbrokerPermission=4\n") == {
        "maxMessageSize": "1024",
        "brokerPermission": "4",
    }
    assert parse_update_body(b"# comment\n\n a : b \n") == {"a": "b"}
    assert parse_update_body(b"") == {}
    bad = parse_update_body(b"no separator here\n")
    assert isinstance(bad, ConfigRefused) and bad.code == ResponseCode.INVALID_PARAMETER
    assert "expected key=value" in bad.remark
    assert isinstance(parse_update_body(b"\xff=1"), ConfigRefused)


# --- registration mask -------------------------------------------------------------------------


def test_registered_topics_masked_by_broker_permission() -> None:
    w = TopicConfigSerializeWrapper({"T": TopicConfig("T", perm=6), "U": TopicConfig("U", perm=7)})
    assert registered_topics(w, 6) is w
    ro = registered_topics(w, 4)
    assert {n: tc.perm for n, tc in ro.topicConfigTable.items()} == {"T": 4, "U": 4}
    assert w.topicConfigTable["T"].perm == 6  # the broker's own table is untouched


def test_update_broker_config_needs_update_on_the_cluster() -> None:
    (right,) = rights_of(RemotingCommand(RequestCode.UPDATE_BROKER_CONFIG), "DefaultCluster")
    assert right.actions == (Action.UPDATE,)
    assert right.resource.key == "Cluster:DefaultCluster"


# --- the config file ---------------------------------------------------------------------------


def test_merge_keeps_comments_and_order_and_appends_new_keys() -> None:
    text = "# my broker\nbrokerName = a\nmaxMessageSize=4194304\n\n# end\n"
    out = merge_properties(text, {"maxMessageSize": "1024", "brokerPermission": "4"})
    assert out == "# my broker\nbrokerName = a\nmaxMessageSize=1024\n\n# end\nbrokerPermission=4\n"


def test_merge_rewrites_every_line_of_a_repeated_key() -> None:
    out = merge_properties("a=1\nb=2\na: 3\n", {"a": "9"})
    assert out == "a=9\nb=2\na=9\n"


_key = st.text("abcXY", min_size=1, max_size=4)
_val = st.text("0123456789xyz", max_size=5)


@given(st.dictionaries(_key, _val, max_size=6), st.dictionaries(_key, _val, max_size=4))
def test_merge_reads_back_as_the_old_values_updated(
    old: dict[str, str], updates: dict[str, str]
) -> None:
    text = "# header\n" + "".join(f"{k}={v}\n" for k, v in old.items())
    merged = merge_properties(text, updates)
    assert parse_properties(merged) == {**old, **updates}


def test_update_properties_file_is_atomic_and_creates_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "broker.conf"
    update_properties_file(str(path), {"maxMessageSize": "1024"})
    assert path.read_text() == "maxMessageSize=1024\n"
    update_properties_file(str(path), {"brokerPermission": "4"})
    assert path.read_text() == "maxMessageSize=1024\nbrokerPermission=4\n"
    assert os.listdir(path.parent) == ["broker.conf"]  # no temp file left behind


# --- the launcher tells each role its file --------------------------------------------------


@pytest.mark.parametrize(
    ("role", "text", "path_of"),
    [
        ("broker", "brokerName=b\n", lambda args: args[0].brokerConfigPath),
        ("namesrv", "listenPort=9876\n", lambda args: args[0].configStorePath),
        (
            "controller",
            "controllerDLegerGroup=g\ncontrollerDLegerPeers=n0-127.0.0.1:9878\n"
            "controllerDLegerSelfId=n0\n",
            lambda args: args[0].configStorePath,
        ),
    ],
)
def test_started_with_c_the_role_persists_into_that_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, role: str, text: str, path_of: Any
) -> None:
    from rocketrio.cli import main as cli_main

    seen: list[tuple[Any, ...]] = []
    monkeypatch.setattr(
        cli_main, "run_service", lambda name, r, log_dir, fn, *args: seen.append(args) or 0
    )
    conf = tmp_path / f"{role}.conf"
    conf.write_text(text)
    assert cli_main.main([role, "-c", str(conf)]) == 0
    assert path_of(seen[0]) == str(conf)
