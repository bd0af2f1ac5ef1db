// One consumer group: its members (client, host, assignment), generation, and committed offset and lag per
// partition, refreshed live; its offsets reset (only while no member is live: the API refuses otherwise).

import * as api from "../api.js";
import { h, replace, section, table, errorBox, form, field, select, flash, every, confirmedButton } from "../ui.js";
import { stateBadge } from "./groups.js";

function partitionRows(rows) {
  return table([
    ["Topic", (r) => r.topic],
    ["Partition", (r) => r.partition],
    ["Position", (r) => r.position ?? "–"],
    ["Committed", (r) => r.committed_offset ?? "–"],
    ["End", (r) => r.end_offset ?? "–"],
    ["Lag", (r) => (r.lag === null || r.lag === undefined ? "–" : h("strong", { "data-testid": "lag" }, r.lag))],
  ], rows, { empty: "none", rowid: (r) => `${r.topic}/${r.partition}` });
}

function membersView(members) {
  return table([
    ["Member", (m) => h("code", {}, m.instance_id)],
    ["Client", (m) => m.client_id || "–"],
    ["Host", (m) => m.client_host || "–"],
    ["Topics", (m) => m.topics.join(", ")],
    ["Assignment", (m) => partitionRows(m.partitions)],
  ], members, { testid: "members", empty: "No live member." });
}

async function resetOffsets(name, values) {
  const topic = values.topic;
  const described = await api.get(`/topics/${api.enc(topic)}`);
  const partitions = values.partition === "" ? described.partitions.map((p) => p.partition) : [Number(values.partition)];
  const offsets = await Promise.all(partitions.map(async (partition) =>
    ({ topic, partition, offset: await api.offsetOf(topic, partition, values.to, values.at) })));
  await api.post(`/consumers/${api.enc(name)}/offsets`, { offsets, reset: true });
  return offsets;
}

export async function render(root, { argument: name }) {
  const summary = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const members = h("div");
  const unassigned = h("div");
  const reset = form({ class: "inline", "data-testid": "reset-offsets" }, [
    field("Topic", "topic", { required: true }),
    field("Partition", "partition", { type: "number", min: 0, placeholder: "all" }),
    select("To", "to", [["earliest"], ["latest"], ["timestamp"], ["offset"]]),
    field("At", "at", { placeholder: "offset or date-time" }),
  ], "Reset offsets", async (values) => {
    const offsets = await resetOffsets(name, values);
    flash(`offsets of ${name} reset: ${offsets.map((o) => `${o.topic}/${o.partition}→${o.offset}`).join(", ")}`);
  });
  const resetNote = h("p", { class: "muted small" });
  const remove = confirmedButton("Delete group", "delete-group", `Delete group ${name} and its committed offsets?`,
    name, async () => {
      await api.del(`/v1/consumer-groups/${api.enc(name)}`);
      location.hash = "#/groups";
    }, `group ${name} deleted`);
  replace(root,
    h("h1", {}, "Consumer group ", h("code", {}, name)),
    summary,
    section("Members", members),
    section("Committed offsets of partitions no member holds", unassigned),
    section("Reset offsets", resetNote, reset),
    section("Delete", remove));
  return every(2000, async () => {
    let group;
    try {
      group = await api.get(`/v1/consumer-groups/${api.enc(name)}`);
    } catch (error) {
      replace(summary, errorBox(error));
      return;
    }
    replace(summary, h("div", { class: "cards", "data-testid": "group-summary" },
      h("div", { class: "card" }, h("div", { class: "muted" }, "State"), stateBadge(group.state)),
      h("div", { class: "card" }, h("div", { class: "muted" }, "Door"), group.door || "–"),
      h("div", { class: "card" }, h("div", { class: "muted" }, "Generation"), String(group.generation)),
      h("div", { class: "card" }, h("div", { class: "muted" }, "Members"), String(group.members.length)),
      h("div", { class: "card" }, h("div", { class: "muted" }, "Total lag"),
        h("strong", { "data-testid": "total-lag" }, group.lag === null ? "–" : String(group.lag)))));
    replace(members, membersView(group.members));
    replace(unassigned, partitionRows(group.unassigned));
    const live = group.members.length > 0;
    for (const control of reset.elements) control.disabled = live;
    resetNote.textContent = live
      ? "Offsets can be reset only while the group has no live member: stop its consumers first."
      : "The group has no live member: its offsets can be reset.";
  });
}
