"""The proxy's grpcio environment (grpc_env.py): grpc core's EventEngine listener turned off for
a proxy process unless the operator chose its experiments, set only before grpcio loads, and
set by the command-line shell before the proxy is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rocketrio.actors.proxy.grpc_env import (
    EXPERIMENTS_VAR,
    prepare_grpc_environment,
    proxy_grpc_environment,
)


def test_the_listener_experiment_is_turned_off_unless_the_operator_set_experiments() -> None:
    assert proxy_grpc_environment({}) == {"GRPC_EXPERIMENTS": "-event_engine_listener"}
    assert proxy_grpc_environment({"PATH": "/bin"}) == {EXPERIMENTS_VAR: "-event_engine_listener"}
    # an operator's own choice (even an empty one) is theirs
    assert proxy_grpc_environment({EXPERIMENTS_VAR: "event_engine_listener"}) == {}
    assert proxy_grpc_environment({EXPERIMENTS_VAR: ""}) == {}


def test_it_is_set_only_while_grpcio_is_not_loaded() -> None:
    environ = {"PATH": "/bin"}
    assert prepare_grpc_environment(environ, loaded={"trio"})
    assert environ == {"PATH": "/bin", EXPERIMENTS_VAR: "-event_engine_listener"}
    late: dict[str, str] = {}
    assert not prepare_grpc_environment(late, loaded={"trio", "grpc"})
    assert late == {}
    chosen = {EXPERIMENTS_VAR: "-event_engine_client"}
    assert prepare_grpc_environment(chosen, loaded=set())
    assert chosen == {EXPERIMENTS_VAR: "-event_engine_client"}


# a fresh interpreter runs `rocketrio proxy` up to its service: what the service would see
PROBE = r"""
import json, os, sys
import rocketrio.cli.main as m
def probe(name, role, log_dir, service, *args):
    print(json.dumps({"var": os.environ.get("GRPC_EXPERIMENTS"), "grpc": "grpc" in sys.modules}))
    return 0
m.run_service = probe
sys.exit(m.main(sys.argv[1:]))
"""


def probe(argv: list[str], env: dict[str, str]) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize(
    "argv",
    [
        ["proxy", "-n", "127.0.0.1:9876", "--grpc-port", "0"],
        ["broker", "--enable-proxy", "-n", "127.0.0.1:9876"],  # local mode: a proxy in a broker
    ],
    ids=["proxy", "broker-enable-proxy"],
)
def test_the_command_sets_it_before_grpcio_loads(argv: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != EXPERIMENTS_VAR}
    # grpcio is loaded by the time the service runs; set after it, the variable would not be
    assert probe(argv, env) == {"var": "-event_engine_listener", "grpc": True}
    assert probe(argv, {**env, EXPERIMENTS_VAR: "-event_engine_client"}) == {
        "var": "-event_engine_client",
        "grpc": True,
    }
