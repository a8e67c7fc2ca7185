"""`rocketrio up`'s plan: the deploy/<mode>/ templates are the one source of its configs."""

from __future__ import annotations

import glob
import os
import tomllib
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.controller.embedded import load_namesrv_configs
from rocketrio.cli.main import broker_config, build_parser, container_config, proxy_config
from rocketrio.cli.up_plan import (
    MODES,
    SUBSTITUTED_KEYS,
    Layout,
    PlanError,
    embedded_controller_addr,
    expected_replicas,
    load_templates,
    plan,
    plan_from,
    processes,
    render,
    templates_root,
    with_local_proxies,
)
from rocketrio.protocol.config import load_config, parse_properties
from tests.harness.paths import REPO

ROOT = REPO

LAYOUTS = [
    Layout("/data/c1"),  # the template's own ports
    Layout("/tmp/x y", namesrv_port=20000, broker_port=20100, flush="SYNC_FLUSH"),
    Layout("/srv/r", host="10.1.2.3", namesrv_port=1000, broker_port=40000, flush="ASYNC_FLUSH"),
]


def _load(role: str, path: str) -> object:
    """Load a config file exactly as `rocketrio <role> -c path` does."""
    if role == "namesrv":
        return load_namesrv_configs(path)
    if role == "broker":
        return broker_config(build_parser().parse_args(["broker", "-c", path]))
    if role == "proxy":
        return proxy_config(build_parser().parse_args(["proxy", "-c", path]))
    if role == "container":
        return container_config(build_parser().parse_args(["container", "-c", path]))
    cfg = load_config(ControllerConfig, path)
    cfg.to_raft_config()
    return cfg


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layout", LAYOUTS, ids=["defaults", "moved", "other-host"])
def test_generated_configs_are_the_templates_modulo_substituted_keys(
    mode: str, layout: Layout
) -> None:
    templates = {t.name: t for t in load_templates(mode)}
    specs = plan(mode, layout)
    assert [s.name for s in specs] == list(templates)  # one process per template file
    for s in specs:
        tpl = parse_properties(templates[s.name].text)
        gen = parse_properties(s.text)
        assert list(gen) == list(tpl), s.name  # same keys, same order, nothing added
        assert gen == s.config
        for key, value in tpl.items():
            if key not in SUBSTITUTED_KEYS:
                assert gen[key] == value, (s.name, key)
        # every comment of the template is kept
        tpl_comments = [ln for ln in templates[s.name].text.splitlines() if ln.startswith("#")]
        assert all(c in s.text.splitlines() for c in tpl_comments)


@pytest.mark.parametrize("mode", MODES)
def test_substituted_values(mode: str) -> None:
    layout = Layout("/base", host="10.0.0.9", namesrv_port=20000, broker_port=30000)
    ns_shift, br_shift = 20000 - 9876, 30000 - 10911
    for t, s in zip(load_templates(mode), plan(mode, layout), strict=True):
        tpl = parse_properties(t.text)
        gen = s.config
        for key in ("listenHost", "brokerIP1"):
            if key in tpl:
                assert gen[key] == "10.0.0.9"
        if "listenPort" in tpl:
            shift = br_shift if s.role in ("broker", "container") else ns_shift
            assert int(gen["listenPort"]) == int(tpl["listenPort"]) + shift
        if "haListenPort" in tpl:
            assert int(gen["haListenPort"]) == int(tpl["haListenPort"]) + br_shift
        for key in ("namesrvAddr", "controllerAddr", "controllerDLegerPeers"):
            if key in tpl:
                want = [
                    f"{a.rsplit(':', 1)[0].split('-')[0] + '-' if key.endswith('Peers') else ''}"
                    f"10.0.0.9:{int(a.rsplit(':', 1)[1]) + ns_shift}"
                    for a in tpl[key].split(";")
                ]
                assert gen[key].split(";") == want, key
        for key in ("storePathRootDir", "controllerStorePath", "logDir"):
            if key in tpl:
                assert gen[key] == os.path.join("/base", tpl[key])
        if "flushDiskType" in tpl:
            assert gen["flushDiskType"] == tpl["flushDiskType"]  # no --flush: the template's


@pytest.mark.parametrize("mode", MODES)
def test_generated_configs_load_as_the_roles_load_them(mode: str, tmp_path: Path) -> None:
    for s in plan(mode, Layout(str(tmp_path), namesrv_port=21000, broker_port=21100)):
        path = tmp_path / f"{s.name}.conf"
        path.write_text(s.text)
        assert _load(s.role, str(path)) is not None


@pytest.mark.parametrize(
    "path", sorted(glob.glob(str(ROOT / "deploy" / "*" / "*.conf"))), ids=os.path.basename
)
def test_every_template_is_a_valid_config_as_is(path: str) -> None:
    """README: each file works directly with `rocketrio <role> -c deploy/<mode>/<file>`."""
    roles = ("namesrv", "controller", "broker", "proxy", "container")
    role = next(r for r in roles if Path(path).name.startswith(r))
    assert _load(role, path) is not None


def test_the_modes_and_their_processes() -> None:
    specs = plan("controller", Layout("/b", namesrv_port=9000, broker_port=9100))
    assert [(s.name, s.role, s.addr) for s in specs] == [
        ("namesrv", "namesrv", "127.0.0.1:9000"),
        ("broker-a-0", "broker", "127.0.0.1:9100"),
        ("broker-a-1", "broker", "127.0.0.1:9110"),
    ]
    assert embedded_controller_addr(specs) == "127.0.0.1:9002"
    assert expected_replicas(specs) == {"broker-a": 2}
    assert expected_replicas(plan("2m-2s-sync", Layout("/b"))) == {"broker-a": 2, "broker-b": 2}
    assert embedded_controller_addr(plan("single", Layout("/b"))) is None
    ports = sorted(
        u.port
        for s in plan("2m-2s-async", Layout("/b", namesrv_port=9000, broker_port=9100))
        for u in s.listens
    )
    assert ports == [9000, 9100, 9101, 9110, 9111, 9120, 9121, 9130, 9131]


def test_flush_flag_overrides_only_flush() -> None:
    for flush in ("SYNC_FLUSH", "ASYNC_FLUSH"):
        for s in plan("2m-noslave", Layout("/b", flush=flush)):
            if s.role == "broker":
                assert s.config["flushDiskType"] == flush
    # without the flag, the template decides (2m-noslave ships SYNC_FLUSH)
    assert {s.config.get("flushDiskType") for s in plan("2m-noslave", Layout("/b"))} == {
        None,
        "SYNC_FLUSH",
    }


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        (
            Layout("/b", broker_port=65530),
            "--broker-port 65530 puts broker-a-1's listenPort at 65540",
        ),
        (Layout("/b", broker_port=65525), "broker-a-1's haListenPort at 65536"),
        (Layout("/b", namesrv_port=65534), "--namesrv-port 65534 puts namesrv's controller"),
        (Layout("/b", namesrv_port=9000, broker_port=9002), "port 9002 would be both namesrv's"),
        (
            Layout("/b", namesrv_port=9001, broker_port=9000),
            "port 9001 would be both namesrv's listenPort and broker-a-0's haListenPort",
        ),
    ],
)
def test_impossible_port_layouts_are_one_line_errors(layout: Layout, message: str) -> None:
    with pytest.raises(PlanError) as e:
        plan("controller", layout)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_a_layout_that_just_fits() -> None:
    specs = plan("single", Layout("/b", namesrv_port=65000, broker_port=65534))
    assert [u.port for s in specs for u in s.listens] == [65000, 65534, 65535]


def test_unknown_mode() -> None:
    with pytest.raises(PlanError, match="unknown mode 'nope'; choose one of controller"):
        plan("nope", Layout("/b"))


def test_render_replaces_values_only() -> None:
    text = "# listenPort=1 stays\nlistenPort=1\nother = 2\nkey: 3\n"
    assert render(text, {"listenPort": "9", "key": "4"}) == (
        "# listenPort=1 stays\nlistenPort=9\nother = 2\nkey=4\n"
    )


def test_templates_are_package_data() -> None:
    """An installed (non-editable) rocketrio ships every template `up` reads."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "rocketrio.deploy" in meta["packages"]
    assert meta["package-dir"]["rocketrio.deploy"] == "deploy"
    patterns = meta["package-data"]["rocketrio.deploy"]
    shipped = {
        str(p.relative_to(ROOT / "deploy")) for pat in patterns for p in (ROOT / "deploy").glob(pat)
    }
    on_disk = {str(p.relative_to(ROOT / "deploy")) for p in (ROOT / "deploy").glob("**/*.conf")}
    # and the Prometheus config and Grafana dashboard `up` and users read (deploy/monitoring/)
    on_disk |= {str(p.relative_to(ROOT / "deploy")) for p in (ROOT / "deploy").glob("monitoring/*")}
    assert on_disk and shipped == on_disk
    for mode in MODES:  # and `up` finds them through the package
        assert (templates_root() / mode).is_dir()


@given(
    mode=st.sampled_from(MODES),
    ns=st.integers(min_value=1, max_value=65535),
    br=st.integers(min_value=1, max_value=65535),
)
def test_any_port_layout_is_refused_or_keeps_every_distance(mode: str, ns: int, br: int) -> None:
    """Whatever the two flags: either a one-line PlanError, or every port is in range, no two
    listeners share one, and each port keeps its distance from its block's start."""
    try:
        specs = plan(mode, Layout("/b", namesrv_port=ns, broker_port=br))
    except PlanError as e:
        assert "\n" not in str(e)
        return
    defaults = plan(mode, Layout("/b"))
    ports = [u.port for s in specs for u in s.listens]
    assert len(set(ports)) == len(ports) and all(1 <= p <= 65535 for p in ports)
    for s, d in zip(specs, defaults, strict=True):
        for u, du in zip(s.listens, d.listens, strict=True):
            block = br - 10911 if s.role in ("broker", "container") else ns - 9876
            assert u.port - du.port == block


def test_container_mode_runs_brokers_inside_two_containers(tmp_path: Path) -> None:
    specs = plan("container-2m-2s", Layout(str(tmp_path), namesrv_port=9000, broker_port=9100))
    assert {s.name: s.container for s in specs if s.role == "broker"} == {
        "broker-a": "container-1",
        "broker-b-s": "container-1",
        "broker-b": "container-2",
        "broker-a-s": "container-2",
    }
    assert [(s.name, s.role, s.addr) for s in processes(specs)] == [
        ("namesrv", "namesrv", "127.0.0.1:9000"),
        ("container-1", "container", "127.0.0.1:9140"),
        ("container-2", "container", "127.0.0.1:9150"),
    ]
    assert expected_replicas(specs) == {"broker-a": 2, "broker-b": 2}
    # each container holds one group's master and the other group's slave
    for c in ("container-1", "container-2"):
        held = [s.config for s in specs if s.container == c]
        assert sorted(cfg["brokerId"] for cfg in held) == ["0", "1"]
        assert len({cfg["brokerName"] for cfg in held}) == 2
    # written side by side, the container's relative paths find its brokers
    for s in specs:
        (tmp_path / f"{s.name}.conf").write_text(s.text)
    cfg = container_config(
        build_parser().parse_args(["container", "-c", str(tmp_path / "container-1.conf")])
    )
    assert cfg.brokerConfigPaths == f"{tmp_path}/broker-a.conf:{tmp_path}/broker-b-s.conf"


def test_container_mode_refusals() -> None:
    specs = plan("container-2m-2s", Layout("/b"))
    with pytest.raises(PlanError, match="--proxy-mode local: this mode runs its brokers inside"):
        with_local_proxies(specs, 8081)
    templates = load_templates("container-2m-2s")
    bad = [
        attrs.evolve(t, text=t.text.replace("broker-b-s.conf", "broker-x.conf"))
        if t.name == "container-1"
        else t
        for t in templates
    ]
    with pytest.raises(PlanError, match=r"names 'broker-x\.conf', no broker here"):
        plan_from(bad, Layout("/b"))
    twice = [
        attrs.evolve(t, text=t.text.replace("broker-a-s.conf", "broker-a.conf"))
        if t.name == "container-2"
        else t
        for t in templates
    ]
    with pytest.raises(PlanError, match="broker-a is already in container-1"):
        plan_from(twice, Layout("/b"))
