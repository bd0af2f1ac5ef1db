// Overview: the cluster's health, its nodes as gossip sees them, and live charts of this node's metrics.

import * as api from "../api.js";
import {
  h, replace, section, table, badge, errorBox, bytes, every, link, gossipBadge, decommissionBadge,
} from "../ui.js";
import { CHARTS, Series, draw } from "../metrics.js";

const REFRESH_MS = 2000;
const series = new Series(); // kept across visits: the charts go on where they were

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
  const chartNote = h("p", { class: "muted small" });
  replace(root,
    h("h1", {}, "Overview"),
    section("Health", health),
    section("Nodes", nodes),
    section("This node's traffic", chartNote, charts));
  const plots = new Map();
  const width = () => Math.max(300, Math.min(560, (document.getElementById("page").clientWidth - 40) / 2));
  const drawCharts = () => {
    if (typeof window.uPlot !== "function") {
      replace(charts, errorBox("the chart library (uPlot) is not installed on this node: run scripts/bootstrap.sh"));
      return;
    }
    for (const chart of CHARTS) {
      const plot = plots.get(chart.id);
      if (plot) { plot.setData(series.data(chart.id)); continue; }
      const box = h("div", { class: "chart", "data-testid": `chart-${chart.id}` });
      charts.append(box);
      plots.set(chart.id, draw(box, chart, series.data(chart.id), width()));
    }
    for (const chart of CHARTS) {
      const box = charts.querySelector(`[data-testid="chart-${chart.id}"]`);
      box.dataset.latest = JSON.stringify(series.latest(chart.id));
      box.dataset.samples = String(series.times.length);
      box.dataset.shown = String(series.shown(chart.id));
    }
  };
  const refresh = async () => {
    const [h1, n1, m1] = await Promise.allSettled([
      api.get("/v1/cluster/health"), api.get("/v1/nodes"), api.get("/metrics", { accept: "text/plain" })]);
    replace(health, h1.status === "fulfilled" ? healthView(h1.value) : errorBox(h1.reason));
    replace(nodes, n1.status === "fulfilled" ? nodesView(n1.value) : errorBox(n1.reason));
    if (m1.status === "fulfilled") {
      series.add(m1.value, Date.now());
      chartNote.textContent = `Refreshed every ${REFRESH_MS / 1000} s from this node's /metrics; ` +
        "open another node's console to see its own.";
      drawCharts();
    } else {
      replace(charts, errorBox(m1.reason));
    }
  };
  return every(REFRESH_MS, refresh);
}
