"""Hand mutants: break one rule of the product at a time (a text replacement in one file), run
the tests named for it, restore the file. Prints one JSON line per mutant: its name, the tests,
`caught` (a test failed) and the seconds it took. Each replacement must match exactly once, so a
mutant whose code moved fails loudly instead of passing unnoticed.

    .venv/bin/python -m tests.hand_mutants            # every mutant
    .venv/bin/python -m tests.hand_mutants "store lock"  # the ones whose name holds the text

The cluster simulation's own mutants (tests/sim/mutants.py) are applied in-process instead:
`pytest tests/sim/test_cluster_sim.py --mutant NAME --seeds N` and the scenario test
`test_the_scenarios_catch_a_broken_product`. Run this on a clean working tree: it rewrites
product files while it runs (and restores them, even when interrupted).
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import attrs

R = str(Path(__file__).resolve().parent.parent)


@attrs.frozen
class Mutant:
    """Replace ``text`` by ``replacement`` in ``path``; one of ``tests`` must then fail."""

    name: str
    path: str
    text: str
    replacement: str
    tests: list[str]


MUTANTS: list[Mutant] = [
    Mutant(
        "master acknowledges before its slave has the data (allAckInSyncStateSet on)",
        "actors/broker/ha/sync_state.py",
        '        """Writes ending at or below this offset may be acknowledged to clients now."""\n',
        '        """Writes ending at or below this offset may be acknowledged to clients now."""\n'
        "        return self.local_max  # MUTANT\n",
        [
            "tests/system/test_chaos_processes.py::test_a_clean_cluster_under_chaos_loses_nothing_acknowledged",
        ],
    ),
    Mutant(
        "CommitLog flush without fsync",
        "storage/commitlog/log.py",
        "            segments.sync(fds, dir_dirty)",
        "            pass  # MUTANT",
        [
            "tests/unit/storage/test_power_cuts.py::test_message_store_survives_power_cuts",
        ],
    ),
    Mutant(
        "Raft log sync without fsync",
        "storage/raft_log.py",
        ("            self._fs.fsync(self._fd)\n        self._unsynced = False"),
        "            pass  # MUTANT\n        self._unsynced = False",
        [
            "tests/unit/storage/test_power_cuts.py::test_raft_log_survives_power_cuts",
        ],
    ),
    Mutant(
        "Raft leader counts its own unsynced entries",
        "actors/raft/replication.py",
        "matches.append(self._stable_index)",
        "matches.append(self.last_index)",
        [
            "tests/unit/actors/raft/test_core.py::test_commit_needs_a_majority_of_durable_copies",
        ],
    ),
    Mutant(
        "signature check skipped",
        "actors/auth/gate.py",
        "user.status is UserStatus.ENABLE and verify(cmd, user.password)",
        "user.status is UserStatus.ENABLE",
        [
            "tests/unit/actors/auth/test_gate.py::test_wrong_signature_refused",
        ],
    ),
    Mutant(
        "broker ACL gate not installed",
        "actors/broker/auth/feature.py",
        ("        self.gate = AuthGate(gate_settings(config), table) if on else None"),
        "        self.gate = None  # MUTANT",
        [
            "tests/actor/broker/test_auth.py",
        ],
    ),
    Mutant(
        "no per-connection held-pull bound",
        "actors/broker/pull/hold.py",
        "        if mine >= self.limits.per_owner or self.count >= self.limits.total:",
        "        if self.count >= self.limits.total:",
        [
            "tests/unit/actors/broker/pull/test_processor.py::test_held_pulls_are_bounded_per_connection_and_in_all",
        ],
    ),
    Mutant(
        "CRC compare skipped on recovery",
        "storage/commitlog/recovery.py",
        ("            scan = scan_segment(data, base, size, check_crc=check_crc, start=at)"),
        ("            scan = scan_segment(data, base, size, check_crc=False, start=at)"),
        [
            "tests/unit/storage/test_message_store_integrity.py::test_flipped_byte_above_the_checkpoint_is_found_after_unclean_shutdown",
        ],
    ),
    Mutant(
        "retention deletes the current segment",
        "actors/broker/store/clean_policy.py",
        (
            "    for seg in segments[:-1]:  # never the last (current) segment\n"
            "        if seg.closed_ms is None:\n            break\n     "
            "   expired = now_ms >= seg.closed_ms + config.file_reserved_ms"
        ),
        (
            "    for seg in segments:  # MUTANT\n        expired = seg.closed_ms "
            "is None or now_ms >= seg.closed_ms + config.file_reserved_ms"
        ),
        [
            "tests/unit/actors/broker/store/test_clean_policy.py::test_at_the_delete_hour_expired_segments_go_oldest_first_and_never_the_last",
        ],
    ),
    Mutant(
        "pull-path CRC check skipped",
        "storage/commitlog/read_check.py",
        "        if crc_intact(data, pos, offset, pos + size) == size:",
        "        if True:  # MUTANT",
        [
            "tests/actor/broker/test_store_integrity.py::test_a_damaged_record_in_an_old_segment_is_never_delivered",
        ],
    ),
    Mutant(
        "store lock not taken",
        "actors/broker/boot/store_open.py",
        ("    lock = StoreLock.acquire(config.storePathRootDir, owner, fs=fs)"),
        (
            "    lock = StoreLock.acquire(config.storePathRootDir + '-mutant-' "
            "+ str(id(store)), owner, fs=fs)"
        ),
        [
            "tests/actor/broker/test_store_integrity.py::test_a_second_broker_on_the_same_store_is_refused",
        ],
    ),
    Mutant(
        "CLI: failed sends exit 0",
        "cli/tools.py",
        "    return EXIT_OK if tally.sent == a.count else EXIT_FAILED",
        "    return EXIT_OK  # MUTANT",
        [
            "tests/actor/cli/test_tools.py",
        ],
    ),
    Mutant(
        "schedule service runs on a slave",
        "actors/broker/schedule/service.py",
        "                if self.is_master():\n                    self._become_active()",
        "                if True:  # MUTANT\n                    self._become_active()",
        [
            "tests/actor/broker/test_delay_messages.py",
        ],
    ),
    Mutant(
        "POP revive ignores ACKs",
        "actors/broker/pop/revive.py",
        "                pending.acked |= 1 << i",
        "                pass  # MUTANT",
        [
            "tests/unit/actors/broker/pop/test_revive.py",
        ],
    ),
    Mutant(
        "static topic: the old leader takes sends",
        "actors/broker/static_topic/send.py",
        "    if not items or items[-1].bname != detail.bname:",
        "    if not items:",
        [
            "tests/unit/actors/broker/static_topic/test_send.py",
        ],
    ),
    Mutant(
        "request table: a code claimed twice is not refused",
        "actors/broker/dispatch/table.py",
        "            if code in table:",
        "            if False:  # MUTANT",
        [
            "tests/unit/actors/broker/dispatch/test_table.py",
        ],
    ),
    Mutant(
        "live config: the send path does not hear maxMessageSize",
        "actors/broker/send/processor.py",
        ("        if changed & SEND_KEYS:\n            self.config = SendConfig.of(config)"),
        "        if False:  # MUTANT\n            self.config = SendConfig.of(config)",
        [
            "tests/actor/cli/test_admin_config.py",
        ],
    ),
    Mutant(
        "one long-poll loop: a held pull is never woken by an arrival",
        "actors/broker/dispatch/long_poll.py",
        ("        if key in self._by_key:\n            self._grown[key] = max_offset"),
        ("        if False:  # MUTANT\n            self._grown[key] = max_offset"),
        [
            "tests/actor/broker/test_messaging.py::test_long_poll_answered_when_message_arrives",
        ],
    ),
    Mutant(
        "role service: a slave is taken for master",
        "actors/broker/roles/replicas_manager.py",
        "        return self.core is not None and self.core.is_master",
        ("        return self.core is not None and self.core.role is not None  # MUTANT"),
        [
            "tests/actor/broker/test_ha_replication.py",
        ],
    ),
]


def main() -> None:
    only = sys.argv[1:]
    for m in MUTANTS:
        if not only or any(o in m.name for o in only):
            run_one(m)


def run_one(m: Mutant) -> None:
    name, old, new, tests = m.name, m.text, m.replacement, m.tests
    f = f"{R}/{m.path}"
    src = open(f).read()
    assert src.count(old) == 1, (name, src.count(old))
    open(f, "w").write(src.replace(old, new))
    t = time.time()
    try:
        r = subprocess.run(
            [f"{R}/.venv/bin/pytest", "-q", "-p", "no:randomly", "-x", *tests],
            cwd=R,
            capture_output=True,
            text=True,
            timeout=900,
        )
        tail = [line for line in r.stdout.splitlines() if " passed" in line or " failed" in line]
        caught = r.returncode != 0
    finally:
        open(f, "w").write(src)
    row = {"mutant": name, "tests": tests, "caught": caught, "summary": tail[-1:]}
    print(json.dumps({**row, "s": round(time.time() - t)}), flush=True)


if __name__ == "__main__":
    main()
