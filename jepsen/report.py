"""The run report: latency and throughput plots with the fault windows shaded, and an HTML page.

``write_report(run_dir)`` reads ``run_dir/history.jsonl`` (docs/jepsen-history.md) and, when present,
``run_dir/results.json`` (jepsen/results.py), and writes into ``run_dir``:

- ``latency-{send,poll,commit,txn,end}.png``: each operation's latency (completion time - invoke time) at its
  invoke time, one marker per outcome (ok, fail, info); operations still pending at the end are counted
  in the title, not drawn (they have no latency);
- ``throughput-{send,poll,commit,txn,end}.png``: completions per second by outcome, in fixed-width time bins;
- ``index.html``: the verdict, the anomalies with the exact operations, availability per fault window
  (with each heal's recovery against its bound, and the writes of the spans without faults:
  ``jepsen.recovery``), the plots, and links to the history, results, run settings and node logs.

Every plot shades each nemesis fault window (from a ``start`` to the next ``stop`` of the same fault; an
open window runs to the end of the history) and labels it with the fault. The page is self-contained: inline
CSS, no scripts, nothing fetched from the network; it links the plots and logs by relative path.

A missing or partial ``results.json`` degrades the page (the verdict reads "not checked", availability is
computed from the history); a history that cannot be read still yields a page that says why.
"""

from __future__ import annotations

import dataclasses
import datetime
import html
import json
import pathlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # matplotlib (~0.6 s of CPU to import) loads when a plot is drawn, not with the checker
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

from jepsen.history import History, HistoryError, JsonDict, Operation, read_history
from jepsen.results import availability as history_availability

OP_TYPES: tuple[str, ...] = ("send", "poll", "commit", "txn", "end")
OUTCOMES: dict[str, tuple[str, str]] = {  # outcome -> (colour, marker)
    "ok": ("#2e7d32", "o"),
    "fail": ("#c62828", "v"),
    "info": ("#ef6c00", "x"),
}
FAULT_COLOURS: dict[str, str] = {
    "kill": "#e53935",
    "pause": "#8e24aa",
    "partition": "#1e88e5",
    "loss": "#00897b",
    "delay": "#fdd835",
    "power-loss": "#6d4c41",
    "corrupt": "#d81b60",
    "clock": "#546e7a",
    "hostile-clients": "#f4511e",
}
FAULT_COLOUR_OTHER = "#9e9e9e"
FAULT_LABEL_CHARS_MAX = 40
THROUGHPUT_BINS_MAX = 150  # bins are 1 s wide, wider when the run is longer than this many seconds
EXAMPLE_OPS_SHOWN = 12  # history lines printed per anomaly example (the full list is in results.json)
VERDICT_COLOURS = {"valid": "#2e7d32", "invalid": "#c62828", "unknown": "#ef6c00"}


@dataclasses.dataclass(frozen=True)
class FaultWindow:
    fault: str
    value: Any
    start: float
    stop: float | None  # None: still open when the history ends


def fault_windows(history: History) -> list[FaultWindow]:
    """The nemesis windows in start order: a ``start`` up to the next ``stop`` of the same fault."""
    windows: list[FaultWindow] = []
    open_at: dict[str, int] = {}
    for event in history.nemesis:
        fault = str(event.get("fault", "?"))
        if event.f == "start" and fault not in open_at:
            open_at[fault] = len(windows)
            windows.append(FaultWindow(fault, event.get("value"), event.time, None))
        elif event.f == "stop" and fault in open_at:
            position = open_at.pop(fault)
            windows[position] = dataclasses.replace(windows[position], stop=event.time)
    return windows


def write_report(run_dir: str) -> str:
    """Write the plots and ``index.html`` into ``run_dir``; returns the path of ``index.html``."""
    directory = pathlib.Path(run_dir)
    index = directory / "index.html"
    results, results_note = _read_results(directory / "results.json")
    try:
        history = read_history(directory / "history.jsonl")
    except (OSError, HistoryError) as error:
        page = _page(directory, results, results_note, None, f"The history could not be read: {error}")
        index.write_text(page, encoding="utf-8")
        return str(index)
    windows = fault_windows(history)
    end_time = max((event.time for event in history.events), default=0.0)
    plots: dict[str, tuple[str, str] | None] = {}
    for f in OP_TYPES:
        ops = [op for op in history.operations if op.f == f]
        if not ops:
            plots[f] = None
            continue
        latency, throughput = f"latency-{f}.png", f"throughput-{f}.png"
        _save(_latency_figure(f, ops, windows, end_time), directory / latency)
        _save(_throughput_figure(f, ops, windows, end_time), directory / throughput)
        plots[f] = (latency, throughput)
    page = _page(directory, results, results_note, _Loaded(history, windows, end_time, plots), None)
    index.write_text(page, encoding="utf-8")
    return str(index)


@dataclasses.dataclass(frozen=True)
class _Loaded:
    history: History
    windows: list[FaultWindow]
    end_time: float
    plots: dict[str, tuple[str, str] | None]


def _read_results(path: pathlib.Path) -> tuple[JsonDict, str | None]:
    """The checker's results, or {} and a note saying why there are none."""
    if not path.exists():
        return {}, "results.json is missing: run `python -m jepsen check DIR` to check this history."
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return {}, f"results.json could not be read: {error}"
    if not isinstance(results, dict):
        return {}, f"results.json holds a {type(results).__name__}, not an object"
    return results, None


# ---------------------------------------------------------------------------------------------------
# Plots


def _save(figure: Figure, path: pathlib.Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    figure.savefig(path, dpi=100)


def _new_axes(title: str, ylabel: str) -> tuple[Figure, Any]:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11, 4.2), layout="constrained")
    axes = figure.add_subplot()
    axes.set_title(title)
    axes.set_xlabel("time since the run started (s)")
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)
    return figure, axes


def _shade(axes: Any, windows: Sequence[FaultWindow], end_time: float) -> list[Patch]:
    """Shade and label each fault window; returns legend handles, one per fault kind."""
    from matplotlib.patches import Patch

    handles: dict[str, Patch] = {}
    lanes: list[float] = []  # the end of the last label in each text lane, so overlapping labels stack
    for window in windows:
        colour = FAULT_COLOURS.get(window.fault, FAULT_COLOUR_OTHER)
        stop = window.stop if window.stop is not None else end_time
        axes.axvspan(window.start, max(stop, window.start), color=colour, alpha=0.18, linewidth=0)
        lane = next((i for i, busy_until in enumerate(lanes) if busy_until <= window.start), len(lanes))
        if lane == len(lanes):
            lanes.append(0.0)
        lanes[lane] = stop
        target = window.value if isinstance(window.value, str) else json.dumps(window.value, default=str)
        label = f"{window.fault} {target}"[:FAULT_LABEL_CHARS_MAX].strip()
        if window.stop is None:
            label += " (open)"
        axes.text(
            window.start,
            0.98 - 0.07 * lane,
            f" {label}",
            transform=axes.get_xaxis_transform(),
            va="top",
            ha="left",
            fontsize=8,
            color="#212121",
            bbox={"facecolor": colour, "alpha": 0.35, "edgecolor": "none", "pad": 1.5},
            clip_on=True,
        )
        handles.setdefault(window.fault, Patch(color=colour, alpha=0.35, label=f"fault: {window.fault}"))
    return list(handles.values())


def _legend(axes: Any, fault_handles: list[Patch]) -> None:
    """Outcomes then fault kinds, outside the plot so that no point hides behind it."""
    handles = [*axes.get_legend_handles_labels()[0], *fault_handles]
    axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)


def _latency_figure(f: str, ops: Sequence[Operation], windows: Sequence[FaultWindow], end: float) -> Figure:
    pending = sum(1 for op in ops if op.completion is None)
    title = f"{f}: latency of {len(ops)} operations"
    if pending:
        title += f" ({pending} still pending at the end, not drawn)"
    figure, axes = _new_axes(title, "latency (ms)")
    handles = _shade(axes, windows, end)
    latencies_ms: list[float] = []
    for outcome, (colour, marker) in OUTCOMES.items():
        points = [
            (op.invoke.time, (op.completion.time - op.invoke.time) * 1000)
            for op in ops
            if op.completion is not None and op.type == outcome
        ]
        if not points:
            continue
        latencies_ms.extend(y for _, y in points)
        axes.scatter(
            [x for x, _ in points],
            [max(y, 0.01) for _, y in points],
            s=12 if marker != "x" else 22,
            c=colour,
            marker=marker,
            alpha=0.7,
            linewidths=1 if marker == "x" else 0,
            label=f"{outcome} ({len(points)})",
        )
    positive = [y for y in latencies_ms if y > 0]
    if positive and max(positive) / max(min(positive), 0.01) > 50:
        axes.set_yscale("log")
        axes.set_ylim(top=max(positive) * 4)  # headroom for the fault labels
    elif positive:
        axes.set_ylim(0, max(positive) * 1.25)
    axes.set_xlim(0, max(end, 1e-3))
    _legend(axes, handles)
    return figure


def _throughput_figure(
    f: str, ops: Sequence[Operation], windows: Sequence[FaultWindow], end: float
) -> Figure:
    width_s = max(1.0, end / THROUGHPUT_BINS_MAX)
    bins = max(1, int(end / width_s) + 1)
    figure, axes = _new_axes(f"{f}: completions per second ({width_s:g} s bins)", "operations / s")
    handles = _shade(axes, windows, end)
    edges = [i * width_s for i in range(bins + 1)]
    for outcome, (colour, _) in OUTCOMES.items():
        counts = [0] * bins
        for op in ops:
            if op.completion is not None and op.type == outcome:
                counts[min(int(op.completion.time / width_s), bins - 1)] += 1
        if not any(counts):
            continue
        rates = [count / width_s for count in counts]
        axes.stairs(rates, edges, color=colour, linewidth=1.6, label=f"{outcome} ({sum(counts)})")
    axes.set_xlim(0, max(end, 1e-3))
    axes.set_ylim(0, axes.get_ylim()[1] * 1.2)  # headroom for the fault labels
    _legend(axes, handles)
    return figure


# ---------------------------------------------------------------------------------------------------
# The page

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px; color: #212121; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
.banner { color: white; padding: 0.8em 1.2em; border-radius: 6px; font-size: 1.3em; font-weight: bold; }
.note { background: #fff8e1; border-left: 4px solid #ef6c00; padding: 0.5em 1em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f5f5f5; } tr.hit td { background: #ffebee; font-weight: bold; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #fafafa; border: 1px solid #eee; padding: 0.5em; overflow-x: auto; font-size: 0.8em; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.3em 0; }
details { margin: 0.4em 0; } summary { cursor: pointer; }
"""


def _mapping(value: Any) -> dict[str, Any]:
    """A results.json field expected to be an object; {} when it is missing or of another type."""
    return value if isinstance(value, dict) else {}


def _sequence(value: Any) -> list[Any]:
    """A results.json field expected to be a list; [] when it is missing or of another type."""
    return value if isinstance(value, list) else []


def _e(value: Any) -> str:
    return html.escape(value if isinstance(value, str) else json.dumps(value, default=str))


def _page(
    directory: pathlib.Path,
    results: JsonDict,
    results_note: str | None,
    loaded: _Loaded | None,
    history_error: str | None,
) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>jepsen run {_e(directory.name)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Fault-injection run <code>{_e(directory.name)}</code></h1>",
        _verdict(results),
    ]
    if results_note:
        parts.append(f'<p class="note">{_e(results_note)}</p>')
    if history_error:
        parts.append(f'<p class="note">{_e(history_error)}</p>')
    parts += _anomalies(results)
    parts += _availability(results, loaded)
    parts += _plots(loaded)
    parts += _statistics(results, loaded)
    parts += _files(directory)
    generated = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    parts.append(f"<p><small>Generated by jepsen/report.py at {generated}.</small></p></body></html>")
    return "\n".join(parts) + "\n"


def _verdict(results: JsonDict) -> str:
    verdict = results.get("verdict")
    if not isinstance(verdict, str):
        return '<div class="banner" style="background:#757575">verdict: not checked</div>'
    colour = VERDICT_COLOURS.get(verdict, "#757575")
    reasons = results.get("reasons")
    listed = ""
    if isinstance(reasons, list) and reasons:
        listed = "<ul>" + "".join(f"<li>{_e(reason)}</li>" for reason in reasons) + "</ul>"
    return f'<div class="banner" style="background:{colour}">verdict: {_e(verdict)}</div>{listed}'


def _anomalies(results: JsonDict) -> list[str]:
    parts = ["<h2>Anomalies</h2>"]
    counts = results.get("anomaly_counts")
    if not isinstance(counts, dict):
        return [*parts, "<p>No anomaly counts (results.json missing or without anomaly_counts).</p>"]
    classes = _mapping(results.get("classes"))
    rows = [
        f'<tr{_hit(count)}><td>{_e(kind)}</td><td class="num">{_e(count)}</td>'
        f"<td>{_e(classes.get(kind, ''))}</td></tr>"
        for kind, count in counts.items()
    ]
    parts.append(
        "<table><tr><th>class</th><th>count</th><th>definition</th></tr>" + "".join(rows) + "</table>"
    )
    unseen = results.get("unseen")
    if isinstance(unseen, dict) and unseen.get("count"):
        parts.append(
            f"<p>Unseen acknowledged sends: {_e(unseen.get('count'))} "
            f"({_e(unseen.get('missing_from_final_read', 0))} missing from a complete final read); "
            f"by key: {_e(unseen.get('by_key', {}))}.</p>"
        )
    examples = results.get("anomalies")
    if not isinstance(examples, dict) or not examples:
        if any(isinstance(c, int) and c > 0 for c in counts.values()):
            parts.append("<p>results.json lists no examples.</p>")
        return parts
    for kind, items in examples.items():
        if not isinstance(items, list):
            continue
        total = counts.get(kind, len(items))
        parts.append(f"<h3>{_e(kind)}: {_e(total)} (showing {len(items)})</h3>")
        for number, item in enumerate(items, start=1):
            parts.append(_example(number, item))
    return parts


def _hit(count: Any) -> str:
    return ' class="hit"' if isinstance(count, int) and count > 0 else ""


def _example(number: int, item: Any) -> str:
    if not isinstance(item, dict):
        return f"<pre>{_e(item)}</pre>"
    detail = {k: v for k, v in item.items() if k not in ("ops", "indexes", "class")}
    ops = _sequence(item.get("ops"))
    lines = [json.dumps(op, separators=(",", ":"), default=str) for op in ops[:EXAMPLE_OPS_SHOWN]]
    if len(ops) > EXAMPLE_OPS_SHOWN:
        lines.append(f"... {len(ops) - EXAMPLE_OPS_SHOWN} more in results.json")
    summary = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in detail.items())
    return (
        f"<details open><summary>#{number}: {_e(summary)}</summary>"
        f"<pre>{_e(chr(10).join(lines)) if lines else '(no operations listed)'}</pre></details>"
    )


def _availability(results: JsonDict, loaded: _Loaded | None) -> list[str]:
    parts = ["<h2>Availability per fault window</h2>"]
    availability = results.get("availability")
    if not isinstance(availability, dict) and loaded is not None:
        availability = history_availability(loaded.history)
        parts.append("<p><small>(computed from the history: results.json has no availability)</small></p>")
    if not isinstance(availability, dict):
        return [*parts, "<p>Not available.</p>"]
    windows = _sequence(availability.get("windows"))
    fs = sorted(
        {f for window in windows if isinstance(window, dict) for f in _ops_of(window)}
        | set(_ops_of(availability.get("outside")))
    )
    head = "".join(f"<th>{_e(f)} ok / total</th>" for f in fs)
    rows = [f"<table><tr><th>#</th><th>fault</th><th>target</th><th>start - stop (s)</th>{head}</tr>"]
    for number, window in enumerate(windows, start=1):
        if not isinstance(window, dict):
            continue
        stop = window.get("stop")
        span = f"{_seconds(window.get('start'))} - {_seconds(stop) if stop is not None else 'end (open)'}"
        cells = "".join(_fraction_cell(_ops_of(window).get(f)) for f in fs)
        rows.append(
            f"<tr><td>{number}</td><td>{_e(window.get('fault', '?'))}</td>"
            f"<td>{_e(window.get('value', ''))}</td><td>{span}</td>{cells}</tr>"
        )
    outside = _ops_of(availability.get("outside"))
    cells = "".join(_fraction_cell(outside.get(f)) for f in fs)
    rows.append(f"<tr><td></td><td><i>outside every window</i></td><td></td><td></td>{cells}</tr></table>")
    if not windows:
        parts.append("<p>No fault windows in this history.</p>")
    return [*parts, *rows, *_recoveries(availability)]


def _recoveries(availability: JsonDict) -> list[str]:
    """Each heal's recovery against its bound, and the writes of the spans without faults."""
    recoveries = [r for r in _sequence(availability.get("recoveries")) if isinstance(r, dict)]
    fault_free = availability.get("fault_free")
    if not recoveries and not isinstance(fault_free, dict):
        return []  # results.json of a checker before jepsen.recovery
    parts = [
        "<h3>Recovery after each heal</h3>",
        "<p>From the heal to the first write acknowledged, against the bound: twice the time the nodes it "
        "brought back took to report ready, plus the longest election timeout and a client's next "
        "attempt (<code>jepsen/recovery.py</code>).</p>",
        "<table><tr><th>#</th><th>healed at (s)</th><th>nodes back</th><th>ready after (s)</th>"
        "<th>first write acknowledged after (s)</th><th>bound (s)</th><th>judged</th></tr>",
    ]
    for number, item in enumerate(recoveries, start=1):
        back = ", ".join(str(n) for n in _sequence(item.get("back"))) or "-"
        took = item.get("recovery_s")
        parts.append(
            f"<tr><td>{number}</td><td>{_seconds(item.get('healed_at'))}</td><td>{_e(back)}</td>"
            f"<td>{_seconds(item.get('ready_s'))}</td><td>{_seconds(took) if took is not None else '-'}</td>"
            f"<td>{_seconds(item.get('bound_s'))}</td><td>{_e(item.get('judged', '?'))}</td></tr>"
        )
    parts.append("</table>")
    if isinstance(fault_free, dict):
        fraction = fault_free.get("ok_fraction")
        share = f" ({fraction * 100:.1f}%)" if isinstance(fraction, int | float) else ""
        parts.append(
            f"<p>Without faults (every node ready, its partitions elected): {_e(fault_free.get('ok'))} of "
            f"{_e(fault_free.get('writes'))} writes acknowledged{share} in "
            f"{_seconds(fault_free.get('seconds'))} s.</p>"
        )
    return parts


def _ops_of(section: Any) -> dict[str, Any]:
    if not isinstance(section, dict):
        return {}
    ops = section.get("ops", section)
    return {f: row for f, row in ops.items() if isinstance(row, dict)} if isinstance(ops, dict) else {}


def _fraction_cell(row: Any) -> str:
    if not isinstance(row, dict):
        return '<td class="num">-</td>'
    ok, total, fraction = row.get("ok"), row.get("total"), row.get("ok_fraction")
    percent = f" ({fraction * 100:.0f}%)" if isinstance(fraction, int | float) else ""
    return f'<td class="num">{_e(ok)} / {_e(total)}{percent}</td>'


def _seconds(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, int | float) else _e(value)


def _plots(loaded: _Loaded | None) -> list[str]:
    parts = ["<h2>Latency and throughput</h2>"]
    if loaded is None:
        return [*parts, "<p>No plots: the history could not be read.</p>"]
    parts.append(
        "<p>Shaded bands are the nemesis fault windows, labelled with the fault. Latency is drawn at each "
        "operation's invoke time; throughput counts completions.</p>"
    )
    for f in OP_TYPES:
        pair = loaded.plots.get(f)
        if pair is None:
            parts.append(f"<p>No <code>{f}</code> operations in this history.</p>")
            continue
        parts.append(f"<h3>{f}</h3>")
        for name in pair:
            parts.append(f'<a href="{_e(name)}"><img src="{_e(name)}" alt="{_e(name)}"></a>')
    return parts


def _statistics(results: JsonDict, loaded: _Loaded | None) -> list[str]:
    parts = ["<h2>Operations</h2>"]
    if loaded is None:
        return [*parts, "<p>Not available.</p>"]
    table: dict[str, dict[str, int]] = {}
    for op in loaded.history.operations:
        outcome = "pending" if op.pending else op.type
        row = table.setdefault(op.f, {"ok": 0, "fail": 0, "info": 0, "pending": 0})
        row[outcome] += 1
    head = "<tr><th>f</th><th>ok</th><th>fail</th><th>info</th><th>pending</th></tr>"
    rows = "".join(
        f"<tr><td>{_e(f)}</td>" + "".join(f'<td class="num">{n}</td>' for n in row.values()) + "</tr>"
        for f, row in sorted(table.items())
    )
    parts.append(f"<table>{head}{rows}</table>")
    history = loaded.history
    parts.append(
        f"<p>{len(history.events)} events over {loaded.end_time:.1f} s, {len(loaded.windows)} fault "
        f"windows{', history truncated' if history.truncated else ''}.</p>"
    )
    stats = results.get("stats")
    if isinstance(stats, dict):
        parts.append(
            "<details><summary>checker statistics</summary>"
            f"<pre>{_e(json.dumps(stats, indent=1, default=str))}</pre></details>"
        )
    warnings = list(history.warnings)
    if warnings:
        parts.append(
            "<p>History warnings:</p><ul>" + "".join(f"<li>{_e(w)}</li>" for w in warnings) + "</ul>"
        )
    return parts


def _files(directory: pathlib.Path) -> list[str]:
    named = [
        ("history.jsonl", "the history (one event per line)"),
        ("results.json", "the checker's results"),
        ("run.json", "run settings, schedule and notes"),
    ]
    links = [
        f'<li><a href="{_e(name)}">{_e(name)}</a>: {_e(what)}</li>'
        for name, what in named
        if (directory / name).exists()
    ]
    links += [f'<li><a href="{_e(path)}">{_e(path)}</a></li>' for path in _node_logs(directory)]
    if not links:
        return ["<h2>Files</h2>", "<p>No history, results or logs found in the run directory.</p>"]
    return ["<h2>Files</h2>", "<ul>", *links, "</ul>"]


def _node_logs(directory: pathlib.Path) -> Iterable[str]:
    """Relative paths of the node logs: ``logs/*.log`` (and any other ``*.log`` directly in the run)."""
    found = sorted(directory.glob("logs/*.log")) + sorted(directory.glob("*.log"))
    return [path.relative_to(directory).as_posix() for path in found]
