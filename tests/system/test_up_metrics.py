"""`rocketrio up` serves Prometheus metrics by default (issue 29 item 6), with real processes: every
NameServer and broker it starts answers /metrics on the port `up` printed, the embedded
controller's series come from its NameServer's, and <dir>/prometheus.yml with its targets file
lists exactly those endpoints; `--no-metrics` leaves them off."""

from __future__ import annotations

import json
import os
import re
import urllib.request

import pytest

from tests.harness.system import start_up

pytestmark = pytest.mark.system


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.status == 200
        return resp.read().decode()


def test_up_turns_metrics_on_for_every_process(tmp_path: os.PathLike[str]) -> None:
    up = start_up(str(tmp_path / "cluster"), "controller", "--no-console")
    try:
        urls = {
            m.group(2): m.group(1)
            for line in up.lines
            if (m := re.search(r"  metrics (http://\S+/metrics)  \((\S+)\)", line))
        }
        assert set(urls) == {"namesrv", "broker-a-0", "broker-a-1"}, up.lines
        texts = {name: _get(url) for name, url in urls.items()}
        assert "rocketmq_rpc_latency" in texts["namesrv"]
        assert re.search(r"^role\{.*\} 3\.0$", texts["namesrv"], re.M)  # embedded controller
        for broker in ("broker-a-0", "broker-a-1"):
            assert re.search(r"^rocketmq_confirm_offset\{", texts[broker], re.M)
        config = os.path.join(up.base_dir, "prometheus.yml")
        assert any(f"prometheus --config.file {config}" in line for line in up.lines)
        with open(os.path.join(up.base_dir, "prometheus-targets.json"), encoding="utf-8") as f:
            targets = {g["labels"]["rocketrio_process"]: g["targets"] for g in json.load(f)}
        assert targets == {n: [u.removeprefix("http://").removesuffix("/metrics")]
                           for n, u in urls.items()}  # fmt: skip
    finally:
        up.stop()


def test_no_metrics_leaves_them_off(tmp_path: os.PathLike[str]) -> None:
    up = start_up(str(tmp_path / "cluster"), "single", "--no-console", "--no-metrics")
    try:
        assert not [line for line in up.lines if "metrics http" in line]
        assert not os.path.exists(os.path.join(up.base_dir, "prometheus.yml"))
        conf = os.path.join(up.base_dir, "conf", "broker-a.conf")
        with open(conf, encoding="utf-8") as f:
            assert "metricsExporterType" not in f.read()
    finally:
        up.stop()
