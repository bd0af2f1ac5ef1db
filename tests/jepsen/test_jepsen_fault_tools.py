"""A run naming a fault this machine (or its own settings) cannot give is refused before anything starts,
naming the fault and what is missing: no fault is dropped from a run. The machine's probes are replaced
by ones that say what is missing, so nothing here needs root; no node starts."""

from __future__ import annotations

import argparse
import pathlib

import pytest

from jepsen import control, disks, fault_tools, lazyfs, nemesis, run_config, runner
from raftlog_dev import releases

NO_IP = "the ip command (iproute2) is missing"
NO_FUSERMOUNT = "fusermount3 is missing (Debian: fuse3; make bootstrap installs it)"
NO_MKFS = "mkfs.ext4 is missing"
Settings = dict[str, object]


@pytest.fixture
def bare_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine without iproute2, fuse3 or e2fsprogs."""
    monkeypatch.setattr(control, "netns_available", lambda: (False, NO_IP))
    monkeypatch.setattr(lazyfs, "unavailable", lambda: NO_FUSERMOUNT)
    monkeypatch.setattr(disks, "unavailable", lambda: NO_MKFS)


@pytest.fixture
def equipped_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control, "netns_available", lambda: (True, "ok"))
    monkeypatch.setattr(lazyfs, "unavailable", lambda: None)
    monkeypatch.setattr(disks, "unavailable", lambda: None)


def config(tmp_path: pathlib.Path, faults: tuple[str, ...], **settings: object) -> run_config.RunConfig:
    return run_config.RunConfig(
        nodes=3,
        faults=faults,
        time_limit_s=10.0,
        directory=str(tmp_path / "runs"),
        **settings,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("faults", "settings", "named"),
    [
        (("kill", "partition"), {}, f"partition: need network namespaces: {NO_IP}"),
        (("delay", "loss"), {}, f"delay, loss: need network namespaces: {NO_IP}"),
        (("node-power-loss",), {"fs": "lazy"}, f"--fs lazy (node-power-loss): {NO_FUSERMOUNT}"),
        (("kill",), {"fs": "lazy"}, f"--fs lazy: {NO_FUSERMOUNT}"),
        (("disk-full", "pause"), {}, f"disk-full: needs small disks of its own: {NO_MKFS}"),
    ],
)
def test_a_fault_whose_tool_is_missing_is_refused_naming_the_tool(
    tmp_path: pathlib.Path, bare_machine: None, faults: tuple[str, ...], settings: Settings, named: str
) -> None:
    with pytest.raises(fault_tools.MissingTool) as refused:
        runner.run(config(tmp_path, faults, **settings))
    assert named in str(refused.value)
    assert not (tmp_path / "runs").exists(), "refused before anything starts"


@pytest.mark.parametrize(
    ("faults", "settings", "named"),
    [
        (("partition",), {"netns": False}, "partition: need network namespaces, and --no-netns turns them"),
        (("cluster-power-loss",), {"fs": "plain"}, "cluster-power-loss: need lazy file systems (--fs lazy)"),
        (("disk-full", "node-power-loss"), {"fs": "lazy"}, "disk-full: not on lazy file systems"),
        (("kill-coordinator",), {}, "kill-coordinator: needs the group workload (--workload group)"),
        (("upgrade", "old-release"), {}, "upgrade, old-release: not in one run"),
    ],
)
def test_a_fault_its_own_settings_rule_out_is_refused(
    tmp_path: pathlib.Path, equipped_machine: None, faults: tuple[str, ...], settings: Settings, named: str
) -> None:
    assert any(named in found for found in fault_tools.refusals(config(tmp_path, faults, **settings)))


def test_on_a_machine_with_every_tool_nothing_is_refused(
    tmp_path: pathlib.Path, equipped_machine: None
) -> None:
    assert fault_tools.refusals(config(tmp_path, nemesis.parse_faults("all"))) == []
    lazy = ("node-power-loss", "cluster-power-loss", "kill", "pause", "partition")
    assert fault_tools.refusals(config(tmp_path, lazy, fs="lazy")) == []
    group = nemesis.parse_faults("all", nemesis.GROUP_FAULTS)
    assert fault_tools.refusals(config(tmp_path, group, workload="group", concurrency=6)) == []


def test_all_leaves_out_only_the_lazy_power_losses_which_are_named_with_fs_lazy() -> None:
    assert set(nemesis.parse_faults("all")) == set(nemesis.FAULTS) - nemesis.LAZY_FAULTS
    assert runner.default_fs(nemesis.parse_faults("all")) == "plain"


@pytest.mark.parametrize("fault", nemesis.VERSION_FAULTS)
def test_a_fault_of_releases_without_the_previous_release_is_refused(
    tmp_path: pathlib.Path, equipped_machine: None, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    def no_release(version: str, root: str) -> releases.Release:
        raise releases.ReleaseError(f"no commit named for {version}")

    monkeypatch.setattr(releases, "release", no_release)
    with pytest.raises(fault_tools.MissingTool, match=f"^{fault}: needs the previous release's code"):
        runner.run(config(tmp_path, (fault, "kill"), upgrade_from="0.1.0"))
    assert not (tmp_path / "runs").exists()


def test_jepsen_run_exits_3_naming_the_missing_tool(
    tmp_path: pathlib.Path, bare_machine: None, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    runner.add_run_arguments(parser)
    args = parser.parse_args(["--nemesis", "kill,partition", "--time-limit", "5", "--dir", str(tmp_path)])
    assert runner.main(args) == runner.EXIT_HARNESS
    assert NO_IP in capsys.readouterr().err
