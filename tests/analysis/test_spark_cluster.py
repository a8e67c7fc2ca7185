"""The job runs unchanged on a real Spark cluster: `spark-submit --master spark://...
analysis/incidents.py LOGDIR --out DIR` against a standalone master and worker started on
loopback from the pyspark installation; the application completes on the cluster and reports
the failover of the hand-written logs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from rocketrio.analysis import incidents
from tests.harness.incident_logs import T0, failover_logs
from tests.harness.spark import (
    SPARK_HOME,
    TINY_INPUT_CONF,
    master_state,
    spark_env,
    standalone_cluster,
)

pytestmark = pytest.mark.system


@pytest.mark.long
def test_spark_submit_to_a_standalone_cluster(tmp_path: Path) -> None:
    logs = failover_logs().write(str(tmp_path / "logs"))
    out = tmp_path / "out"
    with standalone_cluster(str(tmp_path / "spark")) as (url, ui):
        run = subprocess.run(
            [
                os.path.join(SPARK_HOME, "bin", "spark-submit"),
                "--master",
                url,
                *(a for k, v in TINY_INPUT_CONF.items() for a in ("--conf", f"{k}={v}")),
                incidents.__file__,
                logs,
                "--out",
                str(out),
            ],
            env=spark_env(),
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert run.returncode == 0, run.stderr[-4000:]
        apps = master_state(ui)["completedapps"]
    assert [a["name"] for a in apps] == ["rocketrio-incidents"]
    assert "broker-a: master 1 lost at" in run.stdout
    s = json.loads((out / "summary.json").read_text())
    [f] = s["failovers"]
    assert (f["old_master_id"], f["new_master_id"], f["lost_ms"]) == (1, 2, T0 + 1020)
    assert [m["msg_id"] for m in s["lost"]] == ["m3"]
