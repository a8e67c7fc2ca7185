"""The chaos full-disk fault on a store that has a filesystem of its own (a small tmpfs mounted
by the test; needs root and mount, skipped otherwise): available there (and not on the root
filesystem), the ballast fills it to the last byte, healing gives every byte back."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from rocketrio.cli.chaos.faults import Injector, disk_unavailable
from rocketrio.cli.chaos.schedule import FaultKind, FaultStep, Role
from rocketrio.cli.chaos.targets import Cluster, Proc

pytestmark = pytest.mark.system

MOUNT_BYTES = 4 * 1024 * 1024


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    mnt = tmp_path / "store"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={MOUNT_BYTES}", "tmpfs",
                           str(mnt)], capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        (mnt / "broker-a-0").mkdir()
        yield mnt / "broker-a-0"
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _cluster(store_dir: str) -> Cluster:
    broker = Proc("broker-a-0", "broker", "127.0.0.1:10911", (10911,), broker_name="broker-a",
                  store_dir=store_dir)  # fmt: skip
    return Cluster("127.0.0.1:9876", (broker,), pids={"broker-a-0": os.getpid()})


async def test_a_full_disk_fault_fills_the_stores_filesystem_and_healing_frees_it(
    store: Path, tmp_path: Path
) -> None:
    assert disk_unavailable(_cluster(str(tmp_path))) is not None  # the root filesystem: no
    cluster = _cluster(str(store))
    assert disk_unavailable(cluster) is None
    inj = Injector(cluster, 256, lambda _line: None)

    async def the_broker(role: Role) -> Proc:
        return cluster.procs[0]

    inj.resolve = the_broker  # type: ignore[method-assign]  # no NameServer in this test
    async with trio.open_nursery() as n:
        done = await inj.inject(FaultStep(FaultKind.DISK_FULL, Role.MASTER), n)
    assert not isinstance(done, str), done
    st = os.statvfs(store)
    assert st.f_bavail == 0
    with pytest.raises(OSError):  # what the broker's next write meets
        (store / "commitlog").write_bytes(b"x" * 8192)
    inj.heal_all()
    st = os.statvfs(store)
    assert st.f_bavail * st.f_frsize >= MOUNT_BYTES - 64 * 1024
    assert not any(p.name.startswith(".rocketrio-chaos") for p in store.parent.iterdir())
