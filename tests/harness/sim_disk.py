"""SimFileSystem: a deterministic in-memory disk that loses, tears and fails what a real one may.

It implements `rocketrio.storage.fs.FileSystem`, so the real storage code runs on it. Every file
(an inode: fds keep working after unlink or rename, as on POSIX) has two images:

- the *visible* content, which reads see and writes / truncates change at once; each change is
  also queued as a pending op of the file, ``(pos, bytes)`` or ``("trunc", size)``;
- the *durable* image: what survives any crash. ``fsync`` / ``fdatasync`` of an fd of the file
  applies its pending ops to it.

Names work the same way, per directory: creating, unlinking, renaming (``replace``), ``makedirs``
and ``rmtree`` change the visible tree at once and queue a namespace op in the directory that
holds the name; ``fsync_dir`` of that directory makes its entries durable. Strictly per
directory: a new file is lost in a crash unless its directory was fsynced afterwards, however
often the file itself was, and a directory whose own entry in its parent is not durable takes
everything under it along. An unlink not followed by ``fsync_dir`` may be undone, bringing the
file back with what was durable of it.

`crash()` is a power cut: every fd is closed (using one later raises OSError EBADF), locks drop,
and each directory and file keeps its durable image plus a random prefix of its pending ops,
applied in order; the last write applied may be torn (only a random prefix of its bytes
lands). ``crash(lose_unsynced=True)`` keeps nothing that was not made durable (the worst case);
``crash(keep_unsynced=True)`` is a process kill, not a power cut: fds close, locks drop, the data
stays (the page cache survives). ``crash(reorder=True)`` is a disk that writes back in any order
between two fsyncs: each file keeps a random *subset* of its pending ops (applied in order, one
maybe torn), not a prefix, so a write made after another may survive it; that is what an
fsync between two writes to one file is for. The disk stays usable afterwards, so the same
storage code can "restart" on it.

`cut_power_after(fs, calls)` crashes the disk in the middle of storage code: the ``calls``-th
file call from then on crashes it and raises `PowerCut`, and so does every later call (the
process is dead: its cleanup handlers must not touch the disk).

`fail_fsync(path_prefix, count)` makes the next ``count`` fsync / fdatasync / fsync_dir on
matching paths (a string prefix of the normalized path; an fd's path is the one it was opened
with) raise OSError(EIO, or the ``err`` given, e.g. ENOSPC) without making anything durable.
With ``lose_writeback`` a failed file fsync also drops the file's pending writes from what can
ever become durable, as Linux does (pages whose writeback failed are marked clean: a later
fsync succeeds without writing them), while reads still see them: storage code that trusts a
later fsync after a failed one loses those bytes in the next crash. Slow disks are not
modelled here: a simulation delays its worker-thread runner instead.

`set_capacity(nbytes)` makes the disk hold at most ``nbytes`` of file content (the sizes of
every file that has a name or an open fd; names and directories are free; there are no sparse
files, so growing a file with ``ftruncate`` takes space like a write). A write that would pass
it writes what still fits and returns that short count, like a real file system; with no room
left it raises OSError(ENOSPC), and so does an ``ftruncate`` that grows a file past it.
Overwriting bytes a file already holds and shrinking a file always work. ``None`` (the
default) is unlimited.

All randomness comes from the `random.Random` given to the constructor: the same seed and the
same calls give the same disk. Paths are normalized absolute POSIX paths in a tree of the sim's
own (``/sim/broker-a-0/store``); a relative path is taken from ``/``. A lock makes every call
atomic, so storage code may flush from a worker thread as in production.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import posixpath
import random
import threading
from collections.abc import Callable, Iterator
from typing import Any, Literal

from rocketrio.storage.fs import ReadMap, WriteData

ContentOp = tuple[int, bytes] | tuple[Literal["trunc"], int]
_SUPPORTED_FLAGS = (
    os.O_ACCMODE | os.O_CREAT | os.O_EXCL | os.O_TRUNC | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
)


class _Inode:
    """One file: visible content, durable image, pending content ops, flock holder.

    ``diverged``: a failed fsync dropped pending writes (`fail_fsync` with lose_writeback),
    so the durable image can no longer be rebuilt by copying the visible content."""

    __slots__ = ("data", "diverged", "durable", "lock_fd", "pending", "pending_bytes")

    def __init__(self) -> None:
        self.data = bytearray()
        self.durable = bytearray()
        self.pending: list[ContentOp] = []
        self.pending_bytes = 0
        self.lock_fd: int | None = None
        self.diverged = False

    def record(self, op: ContentOp) -> None:
        self.pending.append(op)
        self.pending_bytes += len(op[1]) if isinstance(op[1], bytes) else op[1]

    def sync(self) -> None:
        if not self.pending:
            return
        if self.pending_bytes >= len(self.data) and not self.diverged:  # copy, not replay
            self.durable = bytearray(self.data)
        else:
            for op in self.pending:
                _apply(self.durable, op)
        self.pending.clear()
        self.pending_bytes = 0

    def lose_writeback(self) -> None:
        """A failed writeback: the pending writes will never reach the durable image."""
        if self.pending:
            self.pending.clear()
            self.pending_bytes = 0
            self.diverged = True


# a namespace op: (name, node or None for "no such name"), all pairs applied at once
NamespaceOp = list[tuple[str, "_Inode | _Dir | None"]]


class _Dir:
    """One directory: visible entries, durable entries, pending namespace ops."""

    __slots__ = ("children", "durable", "pending")

    def __init__(self) -> None:
        self.children: dict[str, _Inode | _Dir] = {}
        self.durable: dict[str, _Inode | _Dir] = {}
        self.pending: list[NamespaceOp] = []

    def record(self, op: NamespaceOp) -> None:
        for name, node in op:
            if node is None:
                del self.children[name]
            else:
                self.children[name] = node
        self.pending.append(op)

    def sync(self) -> None:
        self.durable = dict(self.children)
        self.pending.clear()


class _FsyncFault:
    __slots__ = ("err", "lose_writeback", "prefix", "remaining")

    def __init__(self, prefix: str | None, remaining: int, err: int, lose_writeback: bool) -> None:
        self.prefix = prefix
        self.remaining = remaining
        self.err = err
        self.lose_writeback = lose_writeback


class _Open:
    __slots__ = ("append", "inode", "path", "readable", "writable")

    def __init__(self, inode: _Inode, path: str, flags: int) -> None:
        acc = flags & os.O_ACCMODE
        self.inode = inode
        self.path = path
        self.readable = acc != os.O_WRONLY
        self.writable = acc != os.O_RDONLY
        self.append = bool(flags & os.O_APPEND)


def _apply(buf: bytearray, op: ContentOp) -> None:
    pos, arg = op
    if isinstance(arg, bytes):
        assert isinstance(pos, int)
        if pos > len(buf):
            buf.extend(bytes(pos - len(buf)))
        buf[pos : pos + len(arg)] = arg
    elif arg < len(buf):
        del buf[arg:]
    else:
        buf.extend(bytes(arg - len(buf)))


def _error(code: int, path: str) -> OSError:
    return OSError(code, os.strerror(code), path)  # OSError picks the subclass (ENOENT -> ...)


def normalize(path: str) -> str:
    """The sim's key of a path: absolute, normalized, one leading slash."""
    return "/" + posixpath.normpath("/" + path).lstrip("/")


class SimFileSystem:
    """In-memory `FileSystem` with crash and fsync-failure injection (see module docstring)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng if rng is not None else random.Random(0)
        self._root = _Dir()
        self._fds: dict[int, _Open] = {}
        self._next_fd = 3
        self._fsync_faults: list[_FsyncFault] = []
        self._capacity: int | None = None
        self._lock = threading.RLock()
        self._reorder = False
        self.crashes = 0

    # ------------------------------------------------------------------ path helpers

    def _parts(self, path: str) -> list[str]:
        return [p for p in normalize(path).split("/") if p]

    def _lookup(self, path: str, *, durable: bool = False) -> _Inode | _Dir | None:
        node: _Inode | _Dir | None = self._root
        for part in self._parts(path):
            if not isinstance(node, _Dir):
                return None
            node = (node.durable if durable else node.children).get(part)
        return node

    def _parent(self, path: str) -> tuple[_Dir, str]:
        parts = self._parts(path)
        if not parts:
            raise _error(errno.EBUSY, path)
        parent = self._lookup("/".join(parts[:-1]))
        if parent is None:
            raise _error(errno.ENOENT, path)
        if not isinstance(parent, _Dir):
            raise _error(errno.ENOTDIR, path)
        return parent, parts[-1]

    def _dir(self, path: str) -> _Dir:
        node = self._lookup(path)
        if node is None:
            raise _error(errno.ENOENT, path)
        if not isinstance(node, _Dir):
            raise _error(errno.ENOTDIR, path)
        return node

    def _open_file(self, fd: int) -> _Open:
        f = self._fds.get(fd)
        if f is None:
            raise _error(errno.EBADF, f"fd {fd}")
        return f

    def _check_fsync_fault(self, path: str, inode: _Inode | None = None) -> None:
        for fault in self._fsync_faults:
            if fault.prefix is None or path.startswith(fault.prefix):
                fault.remaining -= 1
                if not fault.remaining:
                    self._fsync_faults.remove(fault)
                if inode is not None and fault.lose_writeback:
                    inode.lose_writeback()
                raise OSError(fault.err, "simulated fsync failure", path)

    def _used(self) -> int:
        """File bytes held: every inode with a name or an open fd, each once."""
        seen: set[int] = set()
        used = 0
        stack: list[_Dir] = [self._root]
        while stack:
            for child in stack.pop().children.values():
                if id(child) in seen:
                    continue
                seen.add(id(child))
                if isinstance(child, _Dir):
                    stack.append(child)
                else:
                    used += len(child.data)
        for f in self._fds.values():
            if id(f.inode) not in seen:
                seen.add(id(f.inode))
                used += len(f.inode.data)
        return used

    def _room(self, inode: _Inode, end: int, path: str) -> int:
        """How far (file position) ``inode`` may grow towards ``end`` within the capacity;
        ENOSPC when it cannot grow at all but has to."""
        size = len(inode.data)
        if self._capacity is None or end <= size:
            return end
        room = self._capacity - self._used()
        if room <= 0:
            raise _error(errno.ENOSPC, path)
        return min(end, size + room)

    # ------------------------------------------------------------------ fd calls

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        if flags & ~_SUPPORTED_FLAGS:
            raise ValueError(f"flags {flags:#o} not supported by the simulated disk")
        with self._lock:
            key = normalize(path)
            node = self._lookup(key)
            if node is None:
                if not flags & os.O_CREAT:
                    raise _error(errno.ENOENT, path)
                parent, name = self._parent(key)
                node = _Inode()
                parent.record([(name, node)])
            elif flags & os.O_CREAT and flags & os.O_EXCL:
                raise _error(errno.EEXIST, path)
            elif isinstance(node, _Dir):
                raise _error(errno.EISDIR, path)
            elif flags & os.O_TRUNC and flags & os.O_ACCMODE != os.O_RDONLY:
                node.data.clear()
                node.record(("trunc", 0))
            fd = self._next_fd
            self._next_fd += 1
            self._fds[fd] = _Open(node, key, flags)
            return fd

    def close(self, fd: int) -> None:
        with self._lock:
            f = self._fds.pop(fd, None)
            if f is None:
                raise _error(errno.EBADF, f"fd {fd}")
            if f.inode.lock_fd == fd:
                f.inode.lock_fd = None

    def pread(self, fd: int, size: int, offset: int, /) -> bytes:
        with self._lock:
            f = self._open_file(fd)
            if not f.readable:
                raise _error(errno.EBADF, f.path)
            if size < 0 or offset < 0:
                raise _error(errno.EINVAL, f.path)
            return bytes(f.inode.data[offset : offset + size])

    def pwrite(self, fd: int, data: WriteData, offset: int, /) -> int:
        with self._lock:
            f = self._open_file(fd)
            if not f.writable:
                raise _error(errno.EBADF, f.path)
            if offset < 0:
                raise _error(errno.EINVAL, f.path)
            if f.append:  # Linux: pwrite on an O_APPEND fd appends
                offset = len(f.inode.data)
            return self._write_at(f, bytes(data), offset)

    def write(self, fd: int, data: WriteData, /) -> int:
        with self._lock:
            f = self._open_file(fd)
            if not f.writable:
                raise _error(errno.EBADF, f.path)
            if not f.append:
                raise ValueError("the simulated disk keeps no file position: write needs O_APPEND")
            return self._write_at(f, bytes(data), len(f.inode.data))

    def _write_at(self, f: _Open, data: bytes, offset: int) -> int:
        if data:
            end = self._room(f.inode, offset + len(data), f.path)
            if end <= offset:  # a gap past the end takes the room that was left
                raise _error(errno.ENOSPC, f.path)
            data = data[: end - offset]  # a short write when the disk fills up
            op = (offset, data)
            _apply(f.inode.data, op)
            f.inode.record(op)
        return len(data)

    def ftruncate(self, fd: int, size: int, /) -> None:
        with self._lock:
            f = self._open_file(fd)
            if not f.writable or size < 0:
                raise _error(errno.EINVAL, f.path)
            if self._room(f.inode, size, f.path) < size:
                raise _error(errno.ENOSPC, f.path)
            op: ContentOp = ("trunc", size)
            _apply(f.inode.data, op)
            f.inode.record(op)

    def fsync(self, fd: int, /) -> None:
        with self._lock:
            f = self._open_file(fd)
            self._check_fsync_fault(f.path, f.inode)
            f.inode.sync()

    fdatasync = fsync

    def fsize(self, fd: int) -> int:
        with self._lock:
            return len(self._open_file(fd).inode.data)

    def map_read(self, fd: int) -> ReadMap:
        with self._lock:
            f = self._open_file(fd)
            if not f.readable:
                raise _error(errno.EACCES, f.path)
            return bytes(f.inode.data)

    def flock(self, fd: int) -> None:
        with self._lock:
            inode = self._open_file(fd).inode
            if inode.lock_fd is not None and inode.lock_fd != fd:
                raise BlockingIOError(errno.EWOULDBLOCK, "locked by another open file")
            inode.lock_fd = fd

    # ------------------------------------------------------------------ namespace calls

    def listdir(self, path: str) -> list[str]:
        with self._lock:
            return sorted(self._dir(path).children)

    def exists(self, path: str) -> bool:
        with self._lock:
            return self._lookup(path) is not None

    def isdir(self, path: str) -> bool:
        with self._lock:
            return isinstance(self._lookup(path), _Dir)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        with self._lock:
            node = self._root
            parts = self._parts(path)
            for i, part in enumerate(parts):
                child = node.children.get(part)
                if child is None:
                    child = _Dir()
                    node.record([(part, child)])
                elif not isinstance(child, _Dir):
                    last = i == len(parts) - 1
                    raise _error(errno.EEXIST if last else errno.ENOTDIR, path)
                elif i == len(parts) - 1 and not exist_ok:
                    raise _error(errno.EEXIST, path)
                node = child

    def unlink(self, path: str) -> None:
        with self._lock:
            parent, name = self._parent(path)
            node = parent.children.get(name)
            if node is None:
                raise _error(errno.ENOENT, path)
            if isinstance(node, _Dir):
                raise _error(errno.EISDIR, path)
            parent.record([(name, None)])

    def replace(self, src: str, dst: str) -> None:
        with self._lock:
            src_parent, src_name = self._parent(src)
            node = src_parent.children.get(src_name)
            if node is None:
                raise _error(errno.ENOENT, src)
            dst_parent, dst_name = self._parent(dst)
            old = dst_parent.children.get(dst_name)
            if old is node:
                return
            if isinstance(old, _Dir) and (not isinstance(node, _Dir) or old.children):
                raise _error(errno.EISDIR if not isinstance(node, _Dir) else errno.ENOTEMPTY, dst)
            if isinstance(node, _Dir) and old is not None and not isinstance(old, _Dir):
                raise _error(errno.ENOTDIR, dst)
            if src_parent is dst_parent:  # one atomic op: a crash sees before or after
                src_parent.record([(dst_name, node), (src_name, None)])
            else:
                dst_parent.record([(dst_name, node)])
                src_parent.record([(src_name, None)])

    def rmtree(self, path: str) -> None:
        with self._lock:
            node = self._lookup(path)
            if not isinstance(node, _Dir) or not self._parts(path):
                return  # like shutil.rmtree(ignore_errors=True): nothing to do, no error
            self._empty(node)
            parent, name = self._parent(path)
            parent.record([(name, None)])

    def _empty(self, d: _Dir) -> None:
        """Unlink everything under ``d``, deepest first, each name in its own directory."""
        for name in sorted(d.children):
            child = d.children[name]
            if isinstance(child, _Dir):
                self._empty(child)
            d.record([(name, None)])

    def fsync_dir(self, path: str) -> None:
        with self._lock:
            d = self._dir(path)
            self._check_fsync_fault(normalize(path))
            d.sync()

    # ------------------------------------------------------------------ faults

    def fail_fsync(
        self,
        path_prefix: str | None = None,
        count: int = 1,
        *,
        err: int = errno.EIO,
        lose_writeback: bool = False,
    ) -> None:
        """The next ``count`` fsyncs on paths starting with ``path_prefix`` (any path when
        None) raise OSError(``err``) and make nothing durable; with ``lose_writeback`` a file's
        pending writes never will (module docstring)."""
        if count > 0:
            prefix = None if path_prefix is None else normalize(path_prefix)
            with self._lock:
                self._fsync_faults.append(_FsyncFault(prefix, count, err, lose_writeback))

    def set_capacity(self, nbytes: int | None) -> None:
        """Hold at most ``nbytes`` of file content from now on (None: unlimited); what is
        already stored stays, only growth is refused (module docstring)."""
        with self._lock:
            self._capacity = nbytes

    @property
    def used_bytes(self) -> int:
        """File bytes the disk holds now (what `set_capacity` limits)."""
        with self._lock:
            return self._used()

    def heal(self) -> None:
        """Forget the fsync failures `fail_fsync` armed and no fsync used yet."""
        with self._lock:
            self._fsync_faults.clear()

    def crash(
        self, *, lose_unsynced: bool = False, keep_unsynced: bool = False, reorder: bool = False
    ) -> None:
        """Power cut: close every fd; keep the durable state plus (unless ``lose_unsynced``) a
        random prefix of each file's and directory's pending ops, the last write maybe torn.

        ``keep_unsynced``: the process died but the machine did not (kill -9): every fd is
        closed and every lock dropped, while what was written stays visible (the page cache
        survives); it is still unsynced, so a later power cut may lose it.

        ``reorder``: each file keeps a random subset of its pending ops instead of a prefix
        (directories still keep a prefix)."""
        if keep_unsynced:
            with self._lock:
                self._fds.clear()
                self._clear_locks(self._root, set())
            return
        with self._lock:
            self._fds.clear()
            self.crashes += 1
            seen: set[int] = set()
            self._reorder = reorder
            self._crash_dir(self._root, lose_unsynced, seen)

    def _clear_locks(self, d: _Dir, seen: set[int]) -> None:
        for child in d.children.values():
            if id(child) in seen:
                continue
            seen.add(id(child))
            if isinstance(child, _Dir):
                self._clear_locks(child, seen)
            else:
                child.lock_fd = None

    def _crash_dir(self, d: _Dir, lose_unsynced: bool, seen: set[int]) -> None:
        if id(d) in seen:
            return
        seen.add(id(d))
        if d.pending and not lose_unsynced:
            keep = self.rng.randint(0, len(d.pending))
            for op in d.pending[:keep]:
                for name, node in op:
                    if node is None:
                        d.durable.pop(name, None)
                    else:
                        d.durable[name] = node
        d.pending.clear()
        d.children = dict(d.durable)
        for name in sorted(d.children):
            child = d.children[name]
            if isinstance(child, _Dir):
                self._crash_dir(child, lose_unsynced, seen)
            elif id(child) not in seen:
                seen.add(id(child))
                self._crash_file(child, lose_unsynced)

    def _crash_file(self, inode: _Inode, lose_unsynced: bool) -> None:
        ops = inode.pending
        if ops and not lose_unsynced and self._reorder:
            ops = [op for op in ops if self.rng.random() < 0.5]
            torn = bool(ops) and isinstance(ops[-1][1], bytes) and self.rng.random() < 0.5
            for op in ops[: len(ops) - 1 if torn else len(ops)]:
                _apply(inode.durable, op)
            if torn:
                pos, data = ops[-1]
                assert isinstance(pos, int) and isinstance(data, bytes)
                _apply(inode.durable, (pos, data[: self.rng.randrange(len(data))]))
        elif ops and not lose_unsynced:
            keep = self.rng.randint(0, len(ops))
            torn = keep > 0 and isinstance(ops[keep - 1][1], bytes) and self.rng.random() < 0.5
            for op in ops[: keep - 1 if torn else keep]:
                _apply(inode.durable, op)
            if torn:
                pos, data = ops[keep - 1]
                assert isinstance(pos, int) and isinstance(data, bytes)
                _apply(inode.durable, (pos, data[: self.rng.randrange(len(data))]))
        inode.pending.clear()
        inode.pending_bytes = 0
        inode.data = bytearray(inode.durable)
        inode.lock_fd = None

    # ------------------------------------------------------------------ introspection (tests)

    def visible_bytes(self, path: str) -> bytes:
        """What a read of ``path`` returns now."""
        with self._lock:
            node = self._lookup(path)
            if not isinstance(node, _Inode):
                raise _error(errno.ENOENT if node is None else errno.EISDIR, path)
            return bytes(node.data)

    def durable_bytes(self, path: str) -> bytes:
        """What ``path`` holds after any crash (FileNotFoundError: a crash may lose the name)."""
        with self._lock:
            node = self._lookup(path, durable=True)
            if not isinstance(node, _Inode):
                raise _error(errno.ENOENT if node is None else errno.EISDIR, path)
            return bytes(node.durable)

    def listdir_durable(self, path: str) -> list[str]:
        """The names of directory ``path`` that survive any crash."""
        with self._lock:
            node = self._lookup(path, durable=True)
            if not isinstance(node, _Dir):
                raise _error(errno.ENOENT if node is None else errno.ENOTDIR, path)
            return sorted(node.durable)

    @property
    def open_fds(self) -> int:
        return len(self._fds)

    def files(self, path: str = "/") -> list[str]:
        """Every visible file path under ``path``, sorted (for tests and debugging)."""
        with self._lock:
            out: list[str] = []
            self._walk(self._dir(path), normalize(path).rstrip("/"), out)
            return out

    def _walk(self, d: _Dir, prefix: str, out: list[str]) -> None:
        for name in sorted(d.children):
            child = d.children[name]
            if isinstance(child, _Dir):
                self._walk(child, f"{prefix}/{name}", out)
            else:
                out.append(f"{prefix}/{name}")


# ------------------------------------------------------------------------------ power cuts

FILE_CALLS = (
    "open", "close", "pread", "pwrite", "write", "fsync", "fdatasync", "ftruncate", "fsize",
    "map_read", "listdir", "exists", "isdir", "makedirs", "unlink", "replace", "rmtree",
    "fsync_dir", "flock",
)  # fmt: skip


class PowerCut(Exception):
    """The simulated disk lost power during this file call."""


class PowerCutSwitch:
    """Whether the power cut of `cut_power_after` happened (``fired``)."""

    def __init__(self) -> None:
        self.fired = False


@contextlib.contextmanager
def cut_power_after(
    fs: SimFileSystem, calls: int, *, lose_unsynced: bool = False, reorder: bool = False
) -> Iterator[PowerCutSwitch]:
    """Inside the block, the file call number ``calls`` (0 = the next one) crashes ``fs``
    (see `SimFileSystem.crash`) and raises PowerCut, and every call after it raises PowerCut.
    Leaving the block restores the power (the disk is usable for a restart)."""
    switch = PowerCutSwitch()
    counter = itertools.count()

    def wrap(real: Callable[..., Any], name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if not switch.fired and next(counter) == calls:
                fs.crash(lose_unsynced=lose_unsynced, reorder=reorder)
                switch.fired = True
            if switch.fired:
                raise PowerCut(name)
            return real(*args, **kwargs)

        return call

    for name in FILE_CALLS:
        setattr(fs, name, wrap(getattr(fs, name), name))
    try:
        yield switch
    finally:
        for name in FILE_CALLS:
            delattr(fs, name)
