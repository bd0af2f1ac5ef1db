// One subject of the schema registry: its compatibility level (its own, or the global one it falls back
// to) and every version with its schema id, type, references and text, read-only.

import * as api from "../api.js";
import { h, replace, section, table, errorBox } from "../ui.js";
import { schemaType } from "./schemas.js";

// Avro and JSON schemas are JSON: shown indented; a Protobuf schema is shown as the registry keeps it
function schemaText(version) {
  if (schemaType(version) === "PROTOBUF") return version.schema;
  try { return JSON.stringify(JSON.parse(version.schema), null, 2); } catch { return version.schema; }
}

// The subject's own level; a 404 (40408: none of its own) means the global level applies
async function compatibility(subject) {
  const base = `/config/${api.enc(subject)}`;
  try {
    return { level: (await api.get(base)).compatibilityLevel, own: true };
  } catch (error) {
    if (error.status !== 404) throw error;
    return { level: (await api.get("/config")).compatibilityLevel, own: false };
  }
}

function versionView(version) {
  const references = version.references || [];
  return h("section", { "data-testid": "version", "data-version": version.version },
    h("h2", {}, `Version ${version.version}`),
    h("p", { class: "muted" }, `schema id ${version.id} · ${schemaType(version)}`,
      references.length ? ` · references: ${references.map((r) => `${r.name} (${r.subject} v${r.version})`)
        .join(", ")}` : ""),
    h("pre", { "data-testid": "schema-text" }, schemaText(version)));
}

export async function render(root, { argument: subject }) {
  const summary = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const versions = h("div");
  replace(root, h("h1", {}, "Subject ", h("code", {}, subject)), summary, versions);
  try {
    const base = `/subjects/${api.enc(subject)}/versions`;
    const [level, numbers] = await Promise.all([compatibility(subject), api.get(base)]);
    const shown = await Promise.all(numbers.map((n) => api.get(`${base}/${n}`)));
    replace(summary, h("div", { class: "cards", "data-testid": "subject-summary" },
      h("div", { class: "card" }, h("div", { class: "muted" }, "Compatibility"),
        h("strong", { "data-testid": "compatibility" }, level.level),
        h("div", { class: "muted small" }, level.own ? "the subject's own" : "the global level")),
      h("div", { class: "card" }, h("div", { class: "muted" }, "Versions"), String(numbers.length))));
    replace(versions, table([["Version", (v) => v.version], ["Schema id", (v) => v.id],
      ["Type", (v) => schemaType(v)]], shown, { testid: "versions", rowid: (v) => v.version }),
    shown.slice().reverse().map(versionView));
  } catch (error) {
    replace(summary, errorBox(error));
  }
}
