"""`rocketrio chaos` against three controllers: the soak's layout that `rocketrio up` lacks.

`up` has no mode with three controllers, so this script starts deploy/controller-embedded's
layout itself (three NameServers, each embedding one replica of a 3-replica controller group, and
a broker set of three replicas), as separate processes on loopback under ``--dir``, describes
them in a chaos target file (``targets.json``: roles, addresses, pids and the command that
restarts each one, which chaos runs after a kill), runs ``rocketrio chaos --targets`` with the
flags after ``--``, and stops every process it or chaos started at the end, whatever happens.

    .venv/bin/python bench/chaos_three_controllers.py --dir /tmp/rr3 -- --duration 10m --seed 7

Prints chaos's own output, then ONE JSON line: the result's counts and recovery table.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rocketrio.cli.up_plan import Layout, Template, plan_from, role_of, templates_root

MODE = "controller-embedded"
SKIP = {"namesrv"}  # that folder's one-NameServer variant; the three are namesrv-n0..n2


def templates() -> list[Template]:
    folder = templates_root() / MODE
    out = []
    for f in folder.iterdir():
        name = f.name.removesuffix(".conf")
        if f.name.endswith(".conf") and name not in SKIP:
            out.append(Template(MODE, name, role_of(f.name), f.read_text("utf-8")))
    order = ("namesrv", "controller", "broker")
    return sorted(out, key=lambda t: (order.index(t.role), t.name))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--namesrv-port", type=int, default=24876)
    p.add_argument("--broker-port", type=int, default=24911)
    a, chaos_args = p.parse_known_args()
    chaos_args = [x for x in chaos_args if x != "--"]
    base = os.path.abspath(a.dir)
    specs = plan_from(templates(), Layout(base, namesrv_port=a.namesrv_port,
                                          broker_port=a.broker_port))  # fmt: skip
    os.makedirs(os.path.join(base, "conf"), exist_ok=True)
    os.makedirs(os.path.join(base, "logs"), exist_ok=True)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    rows = []
    for s in specs:
        conf = os.path.join(base, "conf", f"{s.name}.conf")
        Path(conf).write_text(s.text)
        cmd = [sys.executable, "-m", "rocketrio.cli.main", s.role, "-c", conf, "--name", s.name]
        with open(os.path.join(base, "logs", f"{s.name}.out"), "ab") as out:
            procs[s.name] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                             start_new_session=True)  # fmt: skip
        ctrl = next((f"127.0.0.1:{u.port}" for u in s.listens if u.what == "controller peer"),
                    None)  # fmt: skip
        rows.append({
            "name": s.name, "role": s.role, "addr": s.addr, "pid": procs[s.name].pid,
            "ports": [u.port for u in s.listens], "controller_addr": ctrl,
            "broker_name": s.config.get("brokerName"), "store_dir": s.config.get(
                "storePathRootDir"), "restart": cmd,
        })  # fmt: skip
        time.sleep(0.3)
    ns = next(r["addr"] for r in rows if r["role"] == "namesrv")
    targets = os.path.join(base, "targets.json")
    Path(targets).write_text(json.dumps({"namesrv": ns, "processes": rows}, indent=1))
    out_dir = os.path.join(base, "chaos-run")
    try:
        time.sleep(15)  # three controllers elect a leader, three brokers register
        cmd = [sys.executable, "-m", "rocketrio.cli.main", "chaos", "--targets", targets,
               "--out", out_dir, *chaos_args]  # fmt: skip
        code = subprocess.call(cmd)
    finally:
        stop_all(base, procs)
    res = json.loads(Path(out_dir, "result.json").read_text())
    print(json.dumps({
        "exit_code": code, "faults": len(res["faults"]), "acked": res["acked"],
        "checks": {k: v["count"] for k, v in res["checks"].items()},
        "recovery_by_kind": res["recovery_by_kind"]["send"],
    }))  # fmt: skip
    return code


def stop_all(base: str, procs: dict[str, subprocess.Popen[bytes]]) -> None:
    """SIGTERM then SIGKILL every process whose command line names a config under ``base``
    (those started here and those chaos restarted)."""
    conf_dir = os.path.join(base, "conf").encode()
    pids = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if conf_dir in Path(f"/proc/{pid}/cmdline").read_bytes():
                    pids.append(int(pid))
            except OSError:
                continue
    for sig in (signal.SIGCONT, signal.SIGTERM):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
    time.sleep(5)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for popen in procs.values():
        popen.poll()


if __name__ == "__main__":
    sys.exit(main())
