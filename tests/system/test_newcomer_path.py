"""The README's path, as a newcomer runs it: `rocketrio up`, produce, consume, admin commands."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.harness.system import free_port_block, free_up_ports, log_problems, rr, start_up

pytestmark = pytest.mark.system


def test_up_runs_the_demo_and_stops_cleanly(tmp_path: Any) -> None:
    base = free_up_ports("controller", str(tmp_path / "c"))
    r = rr(
        "up",
        "--dir",
        str(tmp_path / "c"),
        "--namesrv-port",
        str(base),
        "--broker-port",
        str(base + 10),
        "--exit-after-demo",
        "--demo-count",
        "300",
        "--console-port",
        str(console_port := free_port_block(1, extra=())),
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cluster is up" in r.stdout
    assert f"console http://127.0.0.1:{console_port}/" in r.stdout
    assert "consumed 300 distinct messages" in r.stdout
    assert "cluster stopped" in r.stdout
    assert not log_problems(str(tmp_path / "c" / "logs"))


def test_produce_consume_and_admin_commands(tmp_path: Any) -> None:
    up = start_up(str(tmp_path / "c"), "controller")
    ns = up.namesrv
    try:
        r = rr("admin", "updateTopic", "-n", ns, "-t", "Orders", "-r", "4", "-w", "4")
        assert r.returncode == 0, r.stderr
        r = rr("produce", "-n", ns, "-t", "Orders", "-c", "5", "--tags", "new", "--keys", "order-1")
        assert r.returncode == 0, r.stderr
        assert r.stdout.count("SEND_OK") == 5
        r = rr(
            "consume",
            "-n",
            ns,
            "-t",
            "Orders",
            "-g",
            "cli_g",
            "--count",
            "5",
            "--from-first",
            "--idle",
            "20",
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout.count("recv Orders") == 5
        r = rr("admin", "clusterList", "-n", ns)
        assert r.returncode == 0 and "broker-a" in r.stdout, r.stdout + r.stderr
        r = rr("admin", "topicRoute", "-n", ns, "-t", "Orders")
        assert r.returncode == 0 and "broker-a" in r.stdout and "4" in r.stdout, r.stdout + r.stderr
        r = rr("admin", "topicStatus", "-n", ns, "-t", "Orders")
        assert r.returncode == 0 and "total messages: 5" in r.stdout, r.stdout + r.stderr
        r = rr("admin", "consumerProgress", "-n", ns, "-g", "cli_g")
        assert r.returncode == 0 and "total lag: 0" in r.stdout, r.stdout + r.stderr
        r = rr("admin", "queryMsgByKey", "-n", ns, "-t", "Orders", "-k", "order-1")
        assert r.returncode == 0 and "5 message(s)" in r.stdout, r.stdout + r.stderr
        msg_id = next(
            line.split(":", 1)[1].strip()
            for line in r.stdout.splitlines()
            if line.startswith("offsetMsgId")
        )
        r = rr("admin", "queryMsgById", "-n", ns, "-i", msg_id, "--json")
        assert r.returncode == 0 and '"topic": "Orders"' in r.stdout, r.stdout + r.stderr
        r = rr("admin", "topicRoute", "-n", ns, "-t", "NoSuchTopic")
        assert r.returncode == 1 and "NoSuchTopic" in r.stderr
        r = rr("admin", "clusterList", "-n", ns, "--json")
        assert r.returncode == 0 and r.stdout.lstrip().startswith("[")
        ctrl = up.read_until(r"controller \(embedded in namesrv\)\s+(\S+)", 1).group(1)
        r = rr("admin", "getSyncStateSet", "-a", ctrl, "-b", "broker-a")
        assert r.returncode == 0 and "broker-a" in r.stdout, r.stdout + r.stderr
        r = rr("admin", "getControllerMetaData", "-a", ctrl)
        assert r.returncode == 0 and ctrl in r.stdout, r.stdout + r.stderr
    finally:
        up.stop()
    assert not log_problems(os.path.join(str(tmp_path / "c"), "logs"))


def test_bad_config_names_the_key(tmp_path: Any) -> None:
    conf = tmp_path / "b.conf"
    conf.write_text("brokerName=x\nlistenPrt=1\n")
    r = rr("broker", "-c", str(conf))
    assert r.returncode == 2
    assert "unknown key listenPrt" in r.stderr and str(conf) in r.stderr


def test_up_refuses_ports_in_use(tmp_path: Any) -> None:
    up = start_up(str(tmp_path / "a"), "single")
    try:
        _host, port = up.namesrv.rsplit(":", 1)
        r = rr(
            "up",
            "--mode",
            "single",
            "--dir",
            str(tmp_path / "b"),
            "--namesrv-port",
            port,
            "--broker-port",
            str(int(port) + 10),
            "--no-demo",
            "--no-console",
            timeout=60,
        )
        assert r.returncode == 2  # refused before starting anything, like every bad flag
        [line] = r.stderr.splitlines()
        ns_pid = up.pid_of("namesrv")
        assert f"{up.namesrv} (namesrv listenPort) already in use by pid {ns_pid}" in line, line
        assert not os.path.exists(os.path.join(str(tmp_path / "b"), "conf"))
    finally:
        up.stop()
