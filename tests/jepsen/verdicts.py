"""What a fault run's test says when its verdict is not valid: the reasons, and each anomaly as the checker
recorded it (the value, where it was read, the operations that witnessed it), so that a run in CI, whose
directory is gone once it ends, leaves enough in the failure's text to find the cause."""

from __future__ import annotations

import json
import pathlib

ACCOUNT_CHARS_MAX = 6_000  # of the anomalies' JSON: a run with hundreds of them names the first ones


def account(run_dir: pathlib.Path) -> str:
    """The run's verdict, reasons and anomalies (results.json), for an assertion's message."""
    results = json.loads((run_dir / "results.json").read_text())
    anomalies = json.dumps(results.get("anomalies", {}), sort_keys=True)
    if len(anomalies) > ACCOUNT_CHARS_MAX:
        anomalies = anomalies[:ACCOUNT_CHARS_MAX] + f"... ({len(anomalies)} characters)"
    return f"{run_dir}: {results['verdict']} {results['reasons']}\nanomalies: {anomalies}"
