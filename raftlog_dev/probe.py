"""Whether a local node answers, and as whom (``raftlog dev`` and its status): the client package's one
readiness probe, with the TLS settings ``cluster.json`` names."""

from __future__ import annotations

from raftlog_client.probe import Probe
from raftlog_client.probe import probe as probe_ready
from raftlog_node.tls import client_context


def probe(url: str, tls: dict[str, str] | None = None, admin_token: str | None = None) -> Probe | None:
    """``GET /status/ready``; None when nothing answers. An https URL: checked against ``tls["ca"]``,
    presenting ``tls["client_cert"]`` (a cluster may require one), as cluster.json names them; the admin
    token of a ``--secure`` cluster, to which alone its nodes name themselves."""
    context = None
    if url.startswith("https:"):
        tls = tls or {}
        context = client_context(tls.get("ca"), tls.get("client_cert"), tls.get("client_key"))
    return probe_ready(url, context, admin_token=admin_token)
