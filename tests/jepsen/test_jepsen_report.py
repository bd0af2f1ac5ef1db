"""The run report: plots with the fault windows shaded, and an HTML page naming the verdict and anomalies."""

from __future__ import annotations

import html
import json
import pathlib
import random
from typing import Any

from jepsen import checker, report
from jepsen.history import build, read_history, write_history

KEYS = ("t0/0", "t0/1")
WINDOWS = (("kill", "n2", 10.0, 20.0), ("partition", "[n1 n2] | [n3]", 30.0, 42.0))
LOST_VALUE = 999_999  # acknowledged, never read although a later offset of its key was


def synthetic_history(seed: int = 7, duration_s: float = 60.0) -> list[dict[str, Any]]:
    """A producer, a consumer and a committer for a minute, slower and failing during two fault windows.
    Every acknowledged send is read by the consumer, except one: the lost write near the end."""
    rng = random.Random(seed)
    timed: list[tuple[float, dict[str, Any]]] = []
    for fault, value, start, stop in WINDOWS:
        timed.append(
            (start, {"process": "nemesis", "type": "info", "f": "start", "fault": fault, "value": value})
        )
        timed.append(
            (stop, {"process": "nemesis", "type": "info", "f": "stop", "fault": fault, "value": value})
        )
    logs: dict[str, list[int]] = {key: [] for key in KEYS}
    position = dict.fromkeys(KEYS, 0)  # the consumer's next offset per key
    free_at = [rng.uniform(0.0, 0.2) for _ in range(3)]  # processes 0 send, 1 poll, 2 commit
    next_value = 0
    while min(free_at) < duration_s - 3:
        process = free_at.index(min(free_at))
        now, key, f = free_at[process], rng.choice(KEYS), ("send", "poll", "commit")[process]
        faulty = any(start <= now < stop for _, _, start, stop in WINDOWS)
        latency = rng.uniform(0.2, 2.0) if faulty else rng.uniform(0.002, 0.03)
        outcome = rng.choices(["ok", "fail", "info"], [0.5, 0.3, 0.2] if faulty else [1, 0, 0])[0]
        invoke: dict[str, Any] = {"process": process, "type": "invoke", "f": f, "key": key}
        done: dict[str, Any] = {"process": process, "type": outcome, "f": f, "key": key}
        if f == "send":
            invoke["value"] = next_value
            if outcome == "ok":
                logs[key].append(next_value)
                done["offset"] = len(logs[key]) - 1
            next_value += 1
        elif f == "poll":
            invoke["offset"] = position[key]
            if outcome == "ok":
                done["records"] = [[o, logs[key][o]] for o in range(position[key], len(logs[key]))]
                position[key] = len(logs[key])
        else:
            invoke.update(group="g", offset=position[key])
            if outcome == "ok":
                done["committed"] = position[key]
        timed += [(now, invoke), (now + latency, done)]
        free_at[process] = now + latency + rng.uniform(0.05, 0.15)
    # The lost write: acked at offset N of t0/0; the consumer's next poll returns the rest but skips N.
    at, offset, key = duration_s - 2, len(logs["t0/0"]), "t0/0"
    unread = [[o, logs[key][o]] for o in range(position[key], offset)]
    send = {"process": 0, "f": "send", "key": key}
    poll = {"process": 1, "f": "poll", "key": key}
    timed += [
        (at, {**send, "type": "invoke", "value": LOST_VALUE}),
        (at + 0.01, {**send, "type": "ok", "offset": offset}),
        (at + 0.02, {**send, "type": "invoke", "value": LOST_VALUE + 1}),
        (at + 0.03, {**send, "type": "ok", "offset": offset + 1}),
        (at + 0.04, {**poll, "type": "invoke", "offset": position[key]}),
        (at + 0.05, {**poll, "type": "ok", "records": [*unread, [offset + 1, LOST_VALUE + 1]]}),
    ]
    timed.sort(key=lambda pair: pair[0])
    return [{"index": i, "time": round(t, 4), **event} for i, (t, event) in enumerate(timed)]


def make_run(tmp_path: pathlib.Path, *, check: bool = True) -> pathlib.Path:
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    write_history(run / "history.jsonl", synthetic_history())
    for node in ("n1", "n2", "n3"):
        (run / "logs" / f"{node}.log").write_text(f"{node} started\n", encoding="utf-8")
    if check:
        results = checker.check(read_history(run / "history.jsonl"))
        (run / "results.json").write_text(json.dumps(results), encoding="utf-8")
    return run


def assert_readable_png(path: pathlib.Path) -> None:
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    assert path.stat().st_size > 20_000, f"{path.name} is only {path.stat().st_size} bytes"
    import numpy  # (matplotlib and numpy load with the tests that look at a plot)
    from matplotlib import image

    pixels = image.imread(path)
    height, width = pixels.shape[:2]
    assert width >= 800 and height >= 300, (path.name, width, height)
    assert float(numpy.std(pixels[..., :3])) > 0.05, f"{path.name} is (nearly) blank"


def test_the_report_plots_every_operation_type_and_names_the_verdict_and_anomalies(
    tmp_path: pathlib.Path,
) -> None:
    run = make_run(tmp_path)
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    assert results["verdict"] == "invalid" and results["anomaly_counts"]["lost-write"] == 1

    index = pathlib.Path(report.write_report(str(run)))

    assert index == run / "index.html"
    page = index.read_text(encoding="utf-8")
    for f in ("send", "poll", "commit"):
        for kind in ("latency", "throughput"):
            name = f"{kind}-{f}.png"
            assert_readable_png(run / name)
            assert f'<img src="{name}"' in page and f'href="{name}"' in page
    text = html.unescape(page)
    assert "verdict: invalid" in text
    assert "lost-write" in text
    assert f'"value":{LOST_VALUE}' in text  # the exact operation of the lost write is shown
    for fault, value, _, _ in WINDOWS:  # availability rows of both windows
        assert f"<td>{fault}</td><td>{html.escape(value)}</td>" in page
    recoveries = results["availability"]["recoveries"]  # each heal's recovery against its bound
    assert len(recoveries) == len(WINDOWS) and "Recovery after each heal" in page
    assert all(f"<td>{r['bound_s']:.1f}</td><td>{r['judged']}</td>" in page for r in recoveries)
    assert "writes acknowledged" in text and "Without faults" in text
    for link in ("history.jsonl", "results.json", "logs/n1.log", "logs/n3.log"):
        assert f'href="{link}"' in page
    assert "http://" not in page and "https://" not in page  # self-contained: nothing fetched


def test_the_fault_windows_are_the_nemesis_start_stop_pairs(tmp_path: pathlib.Path) -> None:
    run = make_run(tmp_path, check=False)
    windows = report.fault_windows(read_history(run / "history.jsonl"))
    assert [(w.fault, w.start, w.stop) for w in windows] == [(f, a, b) for f, _, a, b in WINDOWS]


def test_without_results_the_page_says_not_checked_and_still_plots(tmp_path: pathlib.Path) -> None:
    run = make_run(tmp_path, check=False)
    page = pathlib.Path(report.write_report(str(run))).read_text(encoding="utf-8")
    assert "verdict: not checked" in page and "results.json is missing" in page
    assert "computed from the history" in page  # availability still shown, from the history
    assert_readable_png(run / "latency-send.png")


def test_partial_results_and_an_unreadable_history_degrade_the_page(tmp_path: pathlib.Path) -> None:
    run = make_run(tmp_path, check=False)
    (run / "results.json").write_text(json.dumps({"verdict": "valid"}), encoding="utf-8")
    page = pathlib.Path(report.write_report(str(run))).read_text(encoding="utf-8")
    assert "verdict: valid" in page and "No anomaly counts" in page

    (run / "history.jsonl").write_text('{"index": 0}\n', encoding="utf-8")
    page = pathlib.Path(report.write_report(str(run))).read_text(encoding="utf-8")
    assert "The history could not be read" in page and "verdict: valid" in page


def test_a_fault_still_active_at_the_end_is_an_open_window() -> None:
    events = synthetic_history()
    end = events[-1]["time"]
    pause = {"process": "nemesis", "type": "info", "f": "start", "fault": "pause"}
    events.append({"index": len(events), "time": end, **pause})
    windows = report.fault_windows(build(events))
    assert (windows[-1].fault, windows[-1].start, windows[-1].stop) == ("pause", end, None)


def test_results_of_the_wrong_shape_do_not_break_the_page(tmp_path: pathlib.Path) -> None:
    run = make_run(tmp_path, check=False)
    odd = {"verdict": 3, "reasons": "x", "anomaly_counts": [], "anomalies": "x", "availability": 5}
    (run / "results.json").write_text(json.dumps(odd), encoding="utf-8")
    page = pathlib.Path(report.write_report(str(run))).read_text(encoding="utf-8")
    assert "verdict: not checked" in page and "kill" in page
