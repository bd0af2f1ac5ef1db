"""Whether a local node answers, and as whom: ``GET /status/ready`` (``raftlog dev`` and its status)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass

from api.tls import client_context


@dataclass(frozen=True, slots=True)
class Probe:
    """What a node's HTTP port answered on ``/status/ready``."""

    ready: bool
    node_id: str | None  # as the answering process says (on 200)
    pid: int | None


def probe(url: str, tls: dict[str, str] | None = None) -> Probe | None:
    """``GET /status/ready``; None when nothing answers. An https URL: checked against ``tls["ca"]``,
    presenting ``tls["client_cert"]`` (a cluster may require one), as cluster.json names them."""
    context = None
    if url.startswith("https:"):
        tls = tls or {}
        context = client_context(tls.get("ca"), tls.get("client_cert"), tls.get("client_key"))
    try:
        with urllib.request.urlopen(url + "/status/ready", timeout=1, context=context) as response:
            body = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        exc.close()
        return Probe(False, None, None)
    except (urllib.error.URLError, OSError, ValueError):
        return None
    node_id, pid = body.get("node_id"), body.get("pid")
    return Probe(True, node_id if isinstance(node_id, str) else None, pid if isinstance(pid, int) else None)
