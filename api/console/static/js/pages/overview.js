// Overview: the cluster's health, its nodes as gossip sees them, and live charts of the whole cluster's
// metrics (every live node's /metrics summed, through /v1/cluster/metrics) or of this node's alone.

import * as api from "../api.js";
import {
  h, replace, section, table, badge, errorBox, bytes, every, link, gossipBadge, decommissionBadge, isRefusal,
  notPermitted,
} from "../ui.js";
import { CHARTS, Series, draw } from "../metrics.js";

const REFRESH_MS = 2000;
// kept across visits: the charts go on where they were
const series = { cluster: new Series(), node: new Series() };
let scope = "cluster"; // which the charts show: "cluster" (every node summed) or "node" (this one)

function problems(health) {
  const rows = [
    ["Nodes down", health.nodes_down],
    ["Disks full", health.nodes_disk_full],
    ["Leaderless partitions", health.leaderless_partitions],
    ["Under-replicated partitions", health.under_replicated_partitions],
    ["Failed replicas", (health.failed_replicas || []).map((f) => `${f.topic}/${f.partition} on ${f.node}`)],
    ["Partitions moving", health.moving_partitions],
    ["Nodes in maintenance", health.nodes_maintenance],
    ["Nodes decommissioning", health.nodes_decommissioning],
  ];
  // finished decommissions are no problem: said apart, never in red (`decommission.finished` decides)
  const done = ["Nodes decommissioned", health.nodes_decommissioned, "done"];
  const name = (item) => (typeof item === "string" ? item : item.topic !== undefined
    ? `${item.topic}/${item.partition}` : JSON.stringify(item));
  return [...rows, done].map(([label, list, kind]) => ({ label, list: (list || []).map(name), kind }));
}

function healthView(health) {
  return h("div", { class: "cards", "data-testid": "health" },
    h("div", { class: "card" }, h("div", { class: "muted" }, "Cluster"),
      health.is_healthy ? badge("healthy", "ok") : badge("unhealthy", "bad")),
    h("div", { class: "card" }, h("div", { class: "muted" }, "Controller"), h("strong", {}, health.controller || "none")),
    problems(health).map(({ label, list, kind }) =>
      h("div", { class: "card", "data-testid": `health-${label.toLowerCase().replace(/[^a-z]+/g, "-")}` },
        h("div", { class: "muted" }, label),
        h("strong", { class: list.length && kind !== "done" ? "bad" : "" }, String(list.length)),
        list.length ? h("div", { class: "small" }, list.slice(0, 10).join(", ")) : null)));
}

function nodesView(nodes) {
  return table([
    ["Node", (n) => h("strong", {}, n.node_id)],
    ["Gossip state", (n) => gossipBadge(n.state, n.decommissioned)],
    ["Console", (n) => link(`${n.http}/console`, n.http)],
    ["Leads", (n) => `${n.leader_of} partition${n.leader_of === 1 ? "" : "s"}`],
    ["Disk used", (n) => bytes(n.disk_used_bytes)],
    ["Disk free", (n) => [bytes(n.disk_free_bytes), n.disk_full ? badge("full", "bad") : null]],
    ["Maintenance", (n) => (n.maintenance ? badge("on", "warn") : "off")],
    ["Decommission", (n) => decommissionBadge(n)],
  ], nodes, { testid: "nodes", rowid: (n) => n.node_id });
}

export async function render(root) {
  const health = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const nodes = h("div");
  const charts = h("div", { class: "charts", "data-testid": "charts" });
  const chartNote = h("p", { class: "muted small", "data-testid": "chart-note" });
  const refusedNote = h("div");
  const healthPart = section("Health", health);
  const nodesPart = section("Nodes", nodes);
  const scopes = h("select", { name: "scope", "aria-label": "charts of", "data-testid": "chart-scope" },
    h("option", { value: "cluster" }, "the whole cluster"), h("option", { value: "node" }, "this node"));
  scopes.value = scope;
  scopes.addEventListener("change", () => { scope = scopes.value; drawCharts(); });
  const chartsPart = section("Traffic", h("label", { class: "small scope" }, "Charts of ", scopes), chartNote, charts);
  replace(root,
    h("h1", {}, "Overview"),
    refusedNote,
    healthPart,
    nodesPart,
    chartsPart);
  const plots = new Map();
  const width = () => Math.max(300, Math.min(560, (document.getElementById("page").clientWidth - 40) / 2));
  const drawCharts = () => {
    if (typeof window.uPlot !== "function") {
      replace(charts, errorBox("the chart library (uPlot) is not installed on this node: run scripts/bootstrap.sh"));
      return;
    }
    const shown = series[scope];
    charts.dataset.scope = scope;
    for (const chart of CHARTS) {
      const plot = plots.get(chart.id);
      if (plot) { plot.setData(shown.data(chart.id)); continue; }
      const box = h("div", { class: "chart", "data-testid": `chart-${chart.id}` });
      charts.append(box);
      plots.set(chart.id, draw(box, chart, shown.data(chart.id), width()));
    }
    for (const chart of CHARTS) {
      const box = charts.querySelector(`[data-testid="chart-${chart.id}"]`);
      box.dataset.latest = JSON.stringify(shown.latest(chart.id));
      box.dataset.samples = String(shown.times.length);
      box.dataset.shown = String(shown.shown(chart.id));
    }
  };
  const refresh = async () => {
    const [h1, n1, m1] = await Promise.allSettled([
      api.get("/v1/cluster/health"), api.get("/v1/nodes"), api.get("/v1/cluster/metrics")]);
    const refused = [h1, n1, m1].filter((r) => r.status === "rejected" && isRefusal(r.reason));
    // what the person may not see is said once, in one plain line, not as a red refusal per part
    replace(refusedNote, refused.length ? notPermitted(`The cluster's ${[
      isRefusal(h1.reason) && "health", isRefusal(n1.reason) && "nodes", isRefusal(m1.reason) && "traffic",
    ].filter(Boolean).join(", ")}`, "DESCRIBE on the cluster") : null,
    refused.length ? h("p", { class: "muted" }, "What you may see: the ", link("#/topics", "topics"), " and ",
      link("#/groups", "consumer groups"), " you may describe.") : null);
    const shown = (result, view) => (result.status === "fulfilled" ? view(result.value)
      : isRefusal(result.reason) ? null : errorBox(result.reason));
    replace(health, shown(h1, healthView));
    replace(nodes, shown(n1, nodesView));
    for (const [part, result] of [[healthPart, h1], [nodesPart, n1], [chartsPart, m1]]) {
      part.hidden = result.status === "rejected" && isRefusal(result.reason);
    }
    if (m1.status === "fulfilled") {
      const now = Date.now();
      const answered = m1.value.nodes.filter((n) => n.metrics !== null);
      const own = answered.find((n) => n.node_id === m1.value.node_id);
      series.cluster.add(Object.fromEntries(answered.map((n) => [n.node_id, n.metrics])), now);
      if (own) series.node.add(own.metrics, now);
      const missing = m1.value.nodes.filter((n) => n.metrics === null).map((n) => `${n.node_id}: ${n.error}`);
      chartNote.dataset.nodes = String(answered.length);
      chartNote.textContent = `Refreshed every ${REFRESH_MS / 1000} s from /metrics of ` +
        `${answered.length} of ${m1.value.nodes.length} nodes (summed for the whole cluster; ` +
        `this node is ${m1.value.node_id})` + (missing.length ? `; not counted: ${missing.join("; ")}` : "") + ".";
      drawCharts();
    } else if (!isRefusal(m1.reason)) {
      replace(charts, errorBox(m1.reason));
    }
  };
  return every(REFRESH_MS, refresh);
}
