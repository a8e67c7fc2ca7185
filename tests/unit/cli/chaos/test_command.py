"""`rocketrio chaos` refuses before touching anything: exit 2 and one line naming why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketrio.cli.chaos import command
from rocketrio.cli.chaos.schedule import RANDOM_POOL, FaultKind, usable
from rocketrio.cli.chaos.targets import from_config_file
from rocketrio.cli.main import build_parser, main


def _targets(tmp_path: Path, addr: str = "127.0.0.1:10911", store: str = "") -> str:
    procs = [
        {"name": "namesrv", "role": "namesrv", "addr": "127.0.0.1:9876", "ports": [9876],
         "pid": 1},
        {"name": "broker-a-0", "role": "broker", "addr": addr, "ports": [10911], "pid": 1,
         "broker_name": "broker-a", "store_dir": store or str(tmp_path)},
    ]  # fmt: skip
    path = tmp_path / f"targets-{addr}{bool(store)}.json"
    path.write_text(json.dumps({"namesrv": "127.0.0.1:9876", "processes": procs}))
    return str(path)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--dir", "{tmp}/nothing-here"], "no rocketrio up is running"),
        (["--targets", "{tmp}/missing.json"], "not a chaos target file"),
        (["--targets", "@far"], "is not on this machine's loopback"),
        (["--targets", "@nostore", "--fault", "slowdisk-master"], "slow disk: the store"),
        (["--targets", "@local", "--slow-disk-bps", "0", "--slow-disk-iops", "0"], "every slow"),
        (["--targets", "@local", "--fault", "explode-master"], "unknown fault"),
        (["--targets", "@local", "--exclude", "explode"], "--exclude: 'explode' is not"),
        (["--targets", "@local", "--duration", "20s"], "leaves no time for faults"),
        (["--targets", "@local", "--every", "2s", "--hold", "4s"], "must be longer than"),
        (["--targets", "@local", "--duration", "soon"], "is not a duration"),
    ],
)
def test_refusals_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    subst = {"@local": _targets(tmp_path), "@far": _targets(tmp_path, "10.1.2.3:10911"),
             "@nostore": _targets(tmp_path, store=str(tmp_path / "gone"))}  # fmt: skip
    argv = ["chaos", *(subst.get(a, a.replace("{tmp}", str(tmp_path))) for a in args)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rocketrio chaos: ") and said in err and "\n" not in err


def test_exclude_leaves_a_kind_out_of_the_random_schedule(tmp_path: Path) -> None:
    """A seed drawn while slowdisk was unavailable replays with ``--exclude slowdisk``."""
    cluster = from_config_file(_targets(tmp_path))
    argv = ["chaos", "--targets", "x", "--seed", "11", "--out", str(tmp_path / "o")]
    with_it = command._options(build_parser().parse_args(argv), cluster)
    without = command._options(build_parser().parse_args([*argv, "--exclude", "slowdisk"]),
                               cluster)  # fmt: skip
    assert not any(n.startswith("slowdisk") for n in without.names)
    unavailable = {FaultKind.SLOW_DISK, *command.unavailable_kinds(cluster)}
    assert without.names == usable(RANDOM_POOL, frozenset(unavailable))
    assert with_it.names == usable(RANDOM_POOL, frozenset(command.unavailable_kinds(cluster)))
