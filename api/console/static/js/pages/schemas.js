// The schema registry (Confluent's API on every node): its global compatibility level and mode, and each
// subject's latest version (one GET /schemas?latestOnly=true), read-only. A subject's page: ./subject.js.

import * as api from "../api.js";
import { h, replace, section, table, errorBox, link, every, isRefusal, notPermitted } from "../ui.js";

// A schema's type as the registry answers it: no schemaType means Avro
export const schemaType = (schema) => schema.schemaType || "AVRO";

export async function render(root) {
  const levels = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const listing = h("div");
  replace(root, h("h1", {}, "Schema registry"),
    h("p", { class: "muted" }, "Every node serves Confluent's schema registry API at its HTTP address: ",
      h("code", {}, location.origin), " is a registry URL for serializers."),
    levels, section("Subjects", listing));
  return every(5000, async () => {
    try {
      const [config, mode, latest] = await Promise.all([
        api.get("/config"), api.get("/mode"), api.get("/schemas?latestOnly=true")]);
      replace(levels, h("div", { class: "cards", "data-testid": "registry-global" },
        h("div", { class: "card" }, h("div", { class: "muted" }, "Compatibility (global)"),
          h("strong", { "data-testid": "global-compatibility" }, config.compatibilityLevel)),
        h("div", { class: "card" }, h("div", { class: "muted" }, "Mode (global)"), mode.mode)));
      replace(listing, table([
        ["Subject", (s) => link(`#/schemas/${api.enc(s.subject)}`, s.subject)],
        ["Type", (s) => schemaType(s)],
        ["Latest version", (s) => s.version],
        ["Schema id", (s) => s.id],
      ], latest, { testid: "subjects", empty: "No subjects registered (or none you may read).",
        rowid: (s) => s.subject }));
    } catch (error) {
      replace(levels, isRefusal(error) ? notPermitted("The registry", "DESCRIBE_CONFIGS on the registry")
        : errorBox(error));
    }
  });
}
