"""What each fault needs of the machine and of the run's settings, and the refusal of a run that names a
fault it cannot run: a fault is never dropped from a run.

- ``partition``, ``delay``, ``loss``: network namespaces (root, iproute2's ``ip``, ``ip netns add``
  working; not ``--no-netns``);
- ``node-power-loss``, ``cluster-power-loss``: lazy file systems (``--fs lazy``: ``/dev/fuse``,
  ``fusermount3`` and libfuse 3 from Debian's ``fuse3``, the ``mfusepy`` package); ``--fs lazy`` itself
  needs them whichever faults are named;
- ``disk-full``: small disks of their own (root, ``mkfs.ext4``, ``mount``, loop devices), on plain data
  directories (a lazy file system writes through only at fsync, so a full disk would refuse the sync, not
  the write, which is not the fault);
- ``kill-coordinator``: the group workload (``--workload group``);
- ``upgrade``, ``old-release``: the previous release's code (``jepsen.runner`` builds it, and refuses the
  run when it cannot); not both in one run (``old-release`` raises the level, which keeps the node an
  ``upgrade`` window starts on the previous release out, and never ready).

``make test``'s set-up (``scripts/bootstrap.sh``) installs the tools; ``jepsen run`` exits 3 naming each
fault and what it is missing, before anything starts."""

from __future__ import annotations

from jepsen import control, disks, lazyfs, nemesis
from jepsen.run_config import RunConfig


class MissingTool(control.ControlError):
    """The run names a fault (or a file system) this machine or these settings cannot give it."""


def refusals(config: RunConfig) -> list[str]:
    """Why the run cannot do what it names, one line per fault or setting (empty: it can)."""
    faults = set(config.faults)
    found: list[str] = []
    network = sorted(faults & nemesis.NETWORK_FAULTS)
    if network and not config.netns:
        found.append(f"{', '.join(network)}: need network namespaces, and --no-netns turns them off")
    elif network:
        usable, why = control.netns_available()
        if not usable:
            found.append(f"{', '.join(network)}: need network namespaces: {why}")
    lazy = sorted(faults & nemesis.LAZY_FAULTS)
    if config.fs == "lazy":
        why_not = lazyfs.unavailable()
        if why_not is not None:
            found.append(f"--fs lazy{' (' + ', '.join(lazy) + ')' if lazy else ''}: {why_not}")
    elif lazy:
        found.append(f"{', '.join(lazy)}: need lazy file systems (--fs lazy), and --fs {config.fs} was named")
    if nemesis.DISK_FAULTS & faults:
        if config.fs == "lazy":
            found.append(
                "disk-full: not on lazy file systems (they write through only at fsync, so a full disk "
                "would refuse the sync, not the write): run it without --fs lazy and the lazy power losses"
            )
        else:
            why_not = disks.unavailable()
            if why_not is not None:
                found.append(f"disk-full: needs small disks of its own: {why_not}")
    if set(nemesis.VERSION_FAULTS) <= faults:
        found.append(
            "upgrade, old-release: not in one run (old-release raises the level, and a node an upgrade "
            "window starts on the previous release is then kept out, never ready): run them apart"
        )
    group = sorted(faults & set(nemesis.GROUP_FAULTS))
    if group and config.workload != "group":
        found.append(f"{', '.join(group)}: needs the group workload (--workload group)")
    return found


def refuse_missing(config: RunConfig) -> None:
    """Raise ``MissingTool`` naming everything the run cannot have."""
    found = refusals(config)
    if found:
        raise MissingTool(
            "cannot run what was named (make bootstrap installs the tools; root gives namespaces and loop "
            "devices; or leave the fault out): " + "; ".join(found)
        )
