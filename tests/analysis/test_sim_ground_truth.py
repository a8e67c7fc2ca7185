"""Ground truth from the whole-cluster simulation (SPEC T4 + F1): a seeded scenario kills the
master of broker-a under traffic and brings it back; every simulated process writes the same
JSON logs as the real ones (mock-clock timestamps) and the run records what it knows happened
(`ground_truth.json`: the first write of every (set, epoch) by whom and when). The Spark job's
failovers must name the same new masters and epochs with first writes at the same millisecond,
every epoch with a new master must be found, and no traced acknowledged message may be lost
(the simulation's checker proved none was)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import trio
import trio.testing
from pyspark.sql import SparkSession

from rocketrio.analysis.incidents import run
from tests.sim.cluster_run import run_seed
from tests.sim.cluster_sim import World
from tests.sim.scenario_kit import (
    SEED,
    bid,
    controller_view,
    full_set,
    hold,
    master_proc,
    spec,
    wait_until,
)


async def kill_and_return(w: World) -> None:
    await full_set(w)
    await hold(w, 2, "traffic")
    m = master_proc(w)
    old = bid(m)
    await w.kill(m)
    w.checker.note(f"kill -9 of {m.name}")

    def replaced() -> bool:
        v = controller_view(w)
        return v is not None and v.master is not None and v.master != old

    await wait_until(w, replaced, 15, "a new master")
    await hold(w, 2, "traffic on the new master")
    await w.restart(m)
    await full_set(w, bound_s=30)
    await hold(w, 1, "traffic with the old master back")


async def test_the_job_matches_the_simulations_ground_truth(
    mock_clock: trio.testing.MockClock, spark: SparkSession, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    await run_seed(
        SEED,
        spec=spec(max_messages=300),
        chaos=kill_and_return,
        replay="pytest tests/analysis/test_sim_ground_truth.py",
        log_dir=str(logs),
    )
    truth = json.loads((logs / "ground_truth.json").read_text())
    nodes = {p.stem for p in logs.glob("*.jsonl")}
    assert {"broker-a-0", "broker-a-1", "sim-clients"} <= nodes
    # lines are attributed to the process that logged them, not to whoever connected to it
    for path in logs.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            assert rec["node"] == path.stem
            if rec["event"] == "broker_role_changed":
                assert rec["role"] == "broker"
            if rec["event"] == "elect_master":
                assert rec["role"] in ("controller", "namesrv")
    s = run(spark, [str(logs)], str(tmp_path / "out"))
    assert s["lines"]["skipped"] == {
        "malformed": 0,
        "unknown_event": 0,
        "bad_field": 0,
        "empty_files": 0,
    }, s["lines"]["skipped_examples"]
    first = {(t["broker"], t["epoch"]): t for t in truth["first_writes"]}
    # the job's failovers: the new master and its first write, to the millisecond
    found = s["failovers"]
    assert found, "the scenario killed a master"
    for f in found:
        t = first.get((f["broker"], f["epoch"]))
        if t is None:  # an epoch nobody wrote in (a master replaced again before writing)
            assert f["first_write_ms"] is None
            continue
        assert (f["new_master_id"], f["first_write_ms"]) == (t["broker_id"], t["at_ms"]), f
        assert f["lost_ms"] is None or f["lost_ms"] <= f["elected_ms"] + 1000
        assert f["acked_lost"] == 0
    # every epoch in which a different broker wrote than in the one before is a failover
    by_set: dict[str, list[dict[str, int]]] = {}
    for t in truth["first_writes"]:
        by_set.setdefault(t["broker"], []).append(t)
    for name, writes in by_set.items():
        for prev, cur in itertools.pairwise(writes):
            if cur["broker_id"] != prev["broker_id"]:
                assert any(
                    (f["broker"], f["epoch"], f["new_master_id"])
                    == (name, cur["epoch"], cur["broker_id"])
                    for f in found
                ), (name, cur)
    assert s["acked"] >= 50 and s["lost"] == []  # every traced ack was read back
