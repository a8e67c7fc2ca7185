"""Writing a live config change back into a ``key=value`` config file (UPDATE_*_CONFIG).

Upstream (remoting Configuration.persist) rewrites the whole file with every key of the running
config, defaults included, so the operator's comments and layout are gone and every default of
that version is frozen into the file. rocketrio edits the file in place instead: a changed
key's line keeps its place and gets the new value, a key the file did not name is appended,
every other line (comments, blank lines, other roles' keys in a shared namesrv.conf) is kept
byte for byte. A restart then reads the same values upstream's rewrite would give.

`merge_properties` is the pure text edit; `update_properties_file` reads, edits and writes the
file atomically (temp file, fsync, rename, directory fsync: a crash leaves the old file or the
new one). A file that does not exist yet is created holding just the changed keys.
"""

from __future__ import annotations

from collections.abc import Mapping

from rocketrio.storage.durable import read_file, write_file_atomic
from rocketrio.storage.fs import OS_FS, FileSystem


def _key_of(line: str) -> str | None:
    """The key a properties line sets, None for blank and comment lines (the separators are
    those `protocol.config.parse_properties` reads: the first ``=`` or ``:``)."""
    stripped = line.strip()
    if not stripped or stripped[0] in "#!":
        return None
    seps = [i for i in (stripped.find("="), stripped.find(":")) if i >= 0]
    if not seps:
        return None
    return stripped[: min(seps)].strip()


def merge_properties(text: str, updates: Mapping[str, str]) -> str:
    """``text`` with each key of ``updates`` set to its new value: every line naming the key is
    rewritten in place (a key named twice keeps both lines, both with the new value, so the
    last-wins reading stays right), keys not in the file are appended in ``updates`` order."""
    lines = text.splitlines()
    seen: set[str] = set()
    out: list[str] = []
    for line in lines:
        key = _key_of(line)
        if key is not None and key in updates:
            out.append(f"{key}={updates[key]}")
            seen.add(key)
        else:
            out.append(line)
    out.extend(f"{k}={v}" for k, v in updates.items() if k not in seen)
    return "\n".join(out) + "\n" if out else ""


def update_properties_file(
    path: str, updates: Mapping[str, str], *, fs: FileSystem = OS_FS
) -> None:
    """Blocking: rewrite ``path`` with ``updates`` merged in, durably (see module docstring).
    OSError propagates (the caller refuses the change and names the file)."""
    try:
        text = read_file(path, fs=fs).decode("utf-8")
    except FileNotFoundError:
        text = ""
    write_file_atomic(path, merge_properties(text, updates).encode("utf-8"), fs=fs)
