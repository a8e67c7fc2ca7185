"""`rocketrio up` shows store recovery as it happens: it follows the processes' JSON logs
(``<dir>/logs/<name>.jsonl``) and prints one line per ``store_recovery_progress`` event (a broker
re-dispatching a long CommitLog stretch, e.g. rebuilding a deleted index) and one when the store
is recovered (``commitlog_recovered``), so a slow start is visibly working, not hung.

`progress_line` is the pure part (one JSON log line -> the line to print, or None); `LogTail`
reads what each file gained since the last look, whole lines only; `watch_recovery` is the task.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import trio

POLL_S = 1.0


def progress_line(node: str, raw: str) -> str | None:
    """What `up` prints for one JSON log line of ``node`` (None: nothing)."""
    if "store_recovery_progress" not in raw and "commitlog_recovered" not in raw:
        return None
    try:
        rec = json.loads(raw)
    except ValueError:
        return None
    event = rec.get("event")
    if event == "store_recovery_progress":
        mib = rec.get("done_bytes", 0) // (1024 * 1024)
        total = rec.get("total_bytes", 0) // (1024 * 1024)
        return (
            f"  {node}: recovering its store, {rec.get('phase')} {rec.get('percent')}% "
            f"({mib} of {total} MiB)"
        )
    if event == "commitlog_recovered":
        took = rec.get("took_ms", 0)
        state = "after an unclean shutdown" if rec.get("unclean_shutdown") else "clean"
        return (
            f"  {node}: store recovered in {took} ms ({state}, {rec.get('bytes_scanned', 0)} "
            f"bytes checked, {rec.get('redispatched', 0)} records re-dispatched)"
        )
    return None


class LogTail:
    """New whole lines of the ``*.jsonl`` files of a directory since the last `read`."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self._pos: dict[str, int] = {}
        self._partial: dict[str, bytes] = {}

    def read(self) -> list[tuple[str, str]]:
        """(node, line) pairs, oldest first per file."""
        out: list[tuple[str, str]] = []
        try:
            names = sorted(n for n in os.listdir(self.log_dir) if n.endswith(".jsonl"))
        except FileNotFoundError:
            return out
        for name in names:
            path = os.path.join(self.log_dir, name)
            pos = self._pos.get(name, 0)
            try:
                with open(path, "rb") as f:
                    f.seek(pos)
                    data = f.read()
            except FileNotFoundError:
                continue
            self._pos[name] = pos + len(data)
            data = self._partial.pop(name, b"") + data
            lines = data.split(b"\n")
            if lines[-1]:
                self._partial[name] = lines[-1]
            node = name[: -len(".jsonl")]
            out.extend((node, ln.decode("utf-8", "replace")) for ln in lines[:-1] if ln)
        return out

    def skip_existing(self) -> None:
        """Start after what the files hold now (an earlier run's lines are not news)."""
        self.read()


async def watch_recovery(tail: LogTail, say: Callable[[str], None]) -> None:
    """Print the recovery lines the tailed logs gain (position ``tail`` before the processes
    start, with `LogTail.skip_existing`)."""
    while True:
        await trio.sleep(POLL_S)
        for node, raw in tail.read():
            line = progress_line(node, raw)
            if line is not None:
                say(line)
