// One topic: each partition's leader, replicas and their lag, high watermark, log start and size (the
// leader's view, refreshed live); its configs changed, partitions added, or the topic deleted.

import * as api from "../api.js";
import {
  h, replace, section, table, errorBox, bytes, badge, link, form, field, select, flash, every, confirmedButton,
} from "../ui.js";
import { configText, partitionStates } from "./topics.js";

const CONFIGS = ["retention.ms", "retention.bytes", "segment.bytes", "cleanup.policy", "max.message.bytes",
  "min.cleanable.dirty.ratio", "flush.policy"];
const NUMERIC = new Set(["retention.ms", "retention.bytes", "segment.bytes", "max.message.bytes",
  "min.cleanable.dirty.ratio"]);

// A replica as its partition's state says it; one whose node gossip does not see alive is down (its lag
// is only how far it was when its node stopped answering), not a lagging follower
function replicaView(replica) {
  const state = replica.node_state || "alive";
  if (state !== "alive") {
    return h("div", { class: "replica", "data-node": replica.node, "data-down": state },
      state === "suspect" ? badge(`${replica.node} not answering (suspect)`, "warn")
        : badge(`${replica.node} down (${state})`, "bad"),
      replica.error ? h("span", { class: "small error" }, replica.error) : null);
  }
  const kind = replica.role === "failed" ? "bad" : replica.in_sync === false ? "warn" : "ok";
  const lag = replica.lag === null || replica.lag === undefined ? "" : ` lag ${replica.lag}`;
  return h("div", { class: "replica", "data-node": replica.node },
    badge(`${replica.node} ${replica.role}${lag}`, kind),
    replica.error ? h("span", { class: "small error" }, replica.error) : null);
}

// Why a partition has no leader's view: its leader's node did not answer (it just died; another replica
// takes over within seconds), said plainly, the API's words below
function leaderView(s) {
  if (s.leader) return s.leader;
  if (!s.leader_error) return badge("none", "bad");
  return h("div", { "data-testid": "leader-down" }, badge("leader down: electing", "bad"),
    h("div", { class: "small muted" }, s.leader_error));
}

function partitionsView(name, states) {
  return table([
    ["Partition", (s) => s.partition],
    ["Leader", leaderView],
    ["Replicas", (s) => (s.error ? errorBox(s.error) : s.replicas.map(replicaView))],
    ["High watermark", (s) => s.high_watermark ?? "–"],
    ["Log start", (s) => s.log_start_offset ?? "–"],
    ["Size", (s) => bytes(s.log_bytes)],
    ["Move", (s) => (s.move ? badge(`moving to ${s.move.target.join(", ")}`, "warn") : "–")],
    ["", (s) => [link(`#/records?topic=${api.enc(name)}&partition=${s.partition}`, "records"), " ",
      link(`#/operations?topic=${api.enc(name)}&partition=${s.partition}`, "operate")]],
  ], states, { testid: "partitions", rowid: (s) => String(s.partition) });
}

function configsForm(name, configs) {
  const current = table([["Config", ([k]) => k], ["Value", ([, v]) => v]],
    CONFIGS.map((k) => [k, configText(configs, k)]), { testid: "configs" });
  const change = form({ class: "inline", "data-testid": "alter-configs" }, [
    select("Config", "config", CONFIGS.map((k) => [k])),
    field("Value", "value", { required: true }),
  ], "Set", async (values) => {
    const value = NUMERIC.has(values.config) ? Number(values.value) : values.value;
    await api.patch(`/v1/topics/${api.enc(name)}/configs`, { configs: { [values.config]: value } });
    flash(`${values.config} of ${name} set to ${values.value}`);
    window.dispatchEvent(new HashChangeEvent("hashchange"));
  });
  return [current, change];
}

export async function render(root, { argument: name }) {
  const described = await api.get(`/topics/${api.enc(name)}`);
  const partitions = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const count = described.partitions.length;
  const grow = form({ class: "inline", "data-testid": "add-partitions" }, [
    field("Partitions in all", "partitions", { type: "number", min: count + 1, value: count + 1 }),
  ], "Add partitions", async (values) => {
    await api.post(`/v1/topics/${api.enc(name)}/partitions`, { partitions: Number(values.partitions) });
    flash(`${name} now has ${values.partitions} partitions`);
    window.dispatchEvent(new HashChangeEvent("hashchange"));
  });
  const remove = confirmedButton("Delete topic", "delete-topic", `Delete topic ${name} and all its records?`, name,
    async () => {
      await api.del(`/v1/topics/${api.enc(name)}`);
      location.hash = "#/topics";
    }, `topic ${name} deleted`);
  replace(root,
    h("h1", {}, "Topic ", h("code", {}, name)),
    h("p", { class: "muted" }, `${count} partitions, replication factor ${described.replication_factor}`),
    section("Partitions", partitions),
    section("Configs", configsForm(name, described.configs)),
    section("Grow", grow),
    section("Delete", remove));
  return every(3000, async () => {
    const states = [];
    await partitionStates([name], () => count, (_, p, state, error) => {
      states[p] = state || { partition: p, error, replicas: [] };
    });
    replace(partitions, partitionsView(name, states));
  });
}
