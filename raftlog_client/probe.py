"""Whether a node answers, and as whom: one blocking ``GET /status/ready`` (``urllib``, no retries).

The one readiness probe of the project: ``raftlog dev`` asks it of the nodes it starts (the server's only
use of this package beyond the contract), ``LocalCluster`` of the cluster it waits for, the fault
harness of the nodes it restarts."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass

from raftlog_contract import READY_PATH

PROBE_TIMEOUT_S = 1.0


@dataclass(frozen=True, slots=True)
class Probe:
    """What a node's HTTP port answered on ``/status/ready``."""

    ready: bool  # 200; a node that answers otherwise (503) is up but does not serve yet
    node_id: str | None  # as the answering process says (on 200)
    pid: int | None


def probe(
    url: str,
    context: ssl.SSLContext | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
    admin_token: str | None = None,
) -> Probe | None:
    """``GET url/status/ready``; None when nothing answers (or not HTTP with a JSON body). An https URL is
    checked with ``context``. A node started with ``--require-auth`` names itself and its process only
    to the ``admin_token``."""
    headers = {} if admin_token is None else {"Authorization": f"Bearer {admin_token}"}
    request = urllib.request.Request(url + READY_PATH, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as response:
            body = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        exc.close()
        return Probe(False, None, None)
    except (urllib.error.URLError, OSError, ValueError):
        return None
    if not isinstance(body, dict):
        return Probe(True, None, None)
    node_id, pid = body.get("node_id"), body.get("pid")
    return Probe(True, node_id if isinstance(node_id, str) else None, pid if isinstance(pid, int) else None)


def ready(url: str, context: ssl.SSLContext | None = None, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether ``url`` answers ``GET /status/ready`` with 200."""
    answered = probe(url, context, timeout_s)
    return answered is not None and answered.ready
