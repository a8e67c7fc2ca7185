"""A standalone Spark cluster on loopback, started from the pyspark installation: one master
and one worker (`spark-class org.apache.spark.deploy.master.Master` / `...worker.Worker`),
killed with their process groups at exit."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any

import pyspark

from tests.harness.system import free_port_block

SPARK_HOME = os.path.dirname(pyspark.__file__)
# the tests' Spark settings for inputs of a few hundred lines: one shuffle partition, no
# adaptive re-planning, expressions interpreted rather than compiled (compiling each plan costs
# more than running it). The job's results do not depend on them.
TINY_INPUT_CONF = {
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


# the tests' Spark driver JVMs compile with C1 only: a job over a few thousand lines runs each
# plan's code a few times, and C2 compiling it cost more CPU than it saved (on the 2-core VM:
# the in-process Spark tests 96 s -> 68 s, `rocketrio analyze` on the failover test's logs
# 49 s -> 25 s of JVM CPU). Where the code runs does not change what it computes. pyspark reads
# PYSPARK_SUBMIT_ARGS when it starts the JVM; one the caller set is left as it is.
QUICK_JVM_SUBMIT_ARGS = "--driver-java-options -XX:TieredStopAtLevel=1 pyspark-shell"


def quick_jvm_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with `QUICK_JVM_SUBMIT_ARGS` (for a process that starts a Spark driver)."""
    return {"PYSPARK_SUBMIT_ARGS": QUICK_JVM_SUBMIT_ARGS, **env}


@contextlib.contextmanager
def quick_jvm() -> Iterator[None]:
    """This process's environment with `quick_jvm_env` while a SparkSession starts in it."""
    before = os.environ.get("PYSPARK_SUBMIT_ARGS")
    os.environ["PYSPARK_SUBMIT_ARGS"] = quick_jvm_env(os.environ)["PYSPARK_SUBMIT_ARGS"]
    try:
        yield
    finally:
        if before is None:
            del os.environ["PYSPARK_SUBMIT_ARGS"]
        else:
            os.environ["PYSPARK_SUBMIT_ARGS"] = before


def spark_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=SPARK_HOME,
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_NO_DAEMONIZE="1",
    )
    return env


def master_state(ui_port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
        return dict(json.loads(r.read()))


@contextlib.contextmanager
def standalone_cluster(log_dir: str) -> Iterator[tuple[str, int]]:
    """Yields (master URL, master web UI port) once a worker has registered."""
    # below the ephemeral range, so no outgoing connection takes one before Spark binds it
    base = free_port_block(1, extra=(1, 2))
    port, ui, wui = base, base + 1, base + 2
    spark_class = os.path.join(SPARK_HOME, "bin", "spark-class")
    env = spark_env()
    procs = []
    os.makedirs(log_dir, exist_ok=True)
    try:
        for name, args in (
            (
                "master",
                ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(ui)],
            ),
            (
                "worker",
                ["org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                 "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                 "--webui-port", str(wui)],
            ),
        ):  # fmt: skip
            out = open(os.path.join(log_dir, f"{name}.log"), "w")
            procs.append(
                subprocess.Popen(
                    [spark_class, *args],
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        deadline = time.monotonic() + 90
        while True:
            try:
                if master_state(ui).get("aliveworkers", 0) >= 1:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError(f"the standalone Spark cluster did not start; see {log_dir}")
            time.sleep(0.5)
        yield f"spark://127.0.0.1:{port}", ui
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
