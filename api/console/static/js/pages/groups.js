// Consumer groups of both doors (Kafka-protocol groups and HTTP consumer instances), as the coordinators
// list them, each with its type (classic, consumer: KIP-848, share: KIP-932) and door.

import * as api from "../api.js";
import { h, replace, section, table, errorBox, badge, link, every } from "../ui.js";

export function stateBadge(state) {
  return badge(state, state === "Stable" ? "ok" : state === "Empty" ? "muted" : "warn");
}

export async function render(root) {
  const listing = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  replace(root, h("h1", {}, "Consumer groups"), section("Groups", listing));
  return every(3000, async () => {
    try {
      const { groups } = await api.get("/v1/consumer-groups");
      replace(listing, table([
        ["Group", (g) => link(`#/groups/${api.enc(g.group)}`, g.group)],
        ["Type", (g) => g.group_type || "classic"],
        ["State", (g) => stateBadge(g.state)],
        ["Door", (g) => g.door || "–"],
        ["Members", (g) => g.members],
        ["Generation", (g) => g.generation],
        ["Protocol", (g) => [g.protocol_type || "offsets only", g.assignor ? ` (${g.assignor})` : ""]],
      ], groups, { testid: "groups", empty: "No consumer groups you may describe.", rowid: (g) => g.group }));
    } catch (error) {
      replace(listing, errorBox(error));
    }
  });
}
