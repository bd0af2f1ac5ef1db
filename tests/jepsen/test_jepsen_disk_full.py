"""The disk-full fault on real small disks (no node processes): a node's disk is full while the fault lasts,
what is freed meanwhile is taken again, and stopping it gives the room back."""

from __future__ import annotations

import errno
import os
import random
from pathlib import Path

import pytest
from waiting import wait_until

from jepsen import control, disks, nemesis
from jepsen.recorder import Recorder


def write(path: str, size: int) -> None:
    with open(path, "wb") as file:
        file.write(b"x" * size)
        file.flush()
        os.fsync(file.fileno())


@pytest.mark.needs("small-disks")
async def test_the_disk_full_fault_fills_keeps_full_and_empties_the_targets_disks(tmp_path: Path) -> None:
    nodes = control.plan_loopback(3)
    cluster = control.Cluster(str(tmp_path), nodes, admin_token="t", disk_mib=32)
    recorder = Recorder(str(tmp_path / "history.jsonl"))
    chaos = nemesis.Nemesis(cluster, None, recorder, random.Random(3), {"t0": 1}, [])
    try:
        cluster.mount_disks()
        assert chaos.usable("disk-full")
        write(os.path.join(cluster.data_dir("n1"), "kept"), 4 << 20)  # a node's data, 4 MiB
        await chaos.start("disk-full")
        [active] = chaos.active
        for node in active.targets:
            with pytest.raises(OSError) as refused:
                write(os.path.join(cluster.data_dir(node), "more"), 1 << 20)
            assert refused.value.errno == errno.ENOSPC
        if "n1" in active.targets:  # room a node frees goes to the ballast at the next top-up
            os.unlink(os.path.join(cluster.data_dir("n1"), "kept"))

            async def taken_again(directory: str = cluster.data_dir("n1")) -> bool:
                free = os.statvfs(directory)
                return free.f_bfree * free.f_frsize < 1 << 20

            await wait_until(taken_again, "the ballast took the freed 4 MiB again", every_s=0.1)
            with pytest.raises(OSError):
                write(os.path.join(cluster.data_dir("n1"), "more"), 1 << 20)
        spared = [n.node_id for n in nodes if n.node_id not in active.targets]
        for node in spared:
            write(os.path.join(cluster.data_dir(node), "more"), 1 << 20)
        await chaos.heal()
        for node in active.targets:
            write(os.path.join(cluster.data_dir(node), "more"), 1 << 20)
            assert not os.path.exists(os.path.join(cluster.data_dir(node), disks.BALLAST))
    finally:
        recorder.close()
        assert cluster.unmount_disks() == []
    events = [line for line in (tmp_path / "history.jsonl").read_text().splitlines() if "disk-full" in line]
    assert len(events) == 2 and '"start"' in events[0] and '"ballast_removed"' in events[1]
