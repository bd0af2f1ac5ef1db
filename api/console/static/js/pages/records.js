// Records browser: a partition read from an offset, from the end or from a timestamp, every record shown as
// what its bytes are (JSON pretty-printed, text as text, binary as hex or base64); a key filter; and a form
// that produces a test record with headers.

import * as api from "../api.js";
import { h, replace, section, table, errorBox, badge, when, form, field, select, flash, action } from "../ui.js";
import { classify, fromBase64, toBase64, fromHex, utf8 } from "../bytes.js";

const PAGE_BYTES = 1024 * 1024;
const SHOWN_MAX = 500;

// Records from `offset`, at most `limit` of them, up to the partition's end
async function read(base, offset, limit, isolation) {
  const out = [];
  let next = offset;
  while (out.length < limit) {
    let page;
    try {
      page = await api.get(`${base}/records${api.query({ offset: next, timeout: 0, max_bytes: PAGE_BYTES, isolation })}`,
        { accept: api.BINARY });
    } catch (error) {
      if (error.status === 416 && error.body && next >= error.body.end_offset) break; // the end
      throw error;
    }
    if (!page.length) break;
    out.push(...page);
    next = page[page.length - 1].offset + 1;
  }
  return { records: out.slice(0, limit), next };
}

function bytesView(encoded, binaryAs, testid) {
  const shown = classify(fromBase64(encoded));
  const text = shown.kind === "binary" && binaryAs === "base64" ? toBase64(fromBase64(encoded)) : shown.text;
  return h("div", { class: `value ${shown.kind}`, "data-kind": shown.kind, "data-testid": testid },
    shown.kind === "null" ? h("span", { class: "muted" }, "null") : [
      shown.kind === "text" ? null : badge(shown.kind === "binary" ? binaryAs : shown.kind, "muted"),
      h("pre", {}, text)]);
}

function headersView(headers, binaryAs) {
  if (!headers || !headers.length) return h("span", { class: "muted" }, "–");
  return h("dl", { class: "headers" }, headers.map((header) => [
    h("dt", {}, header.key), h("dd", {}, bytesView(header.value, binaryAs))]));
}

function keyText(record) {
  const key = fromBase64(record.key);
  return key === null ? "" : classify(key).text;
}

function recordsView(records, binaryAs) {
  return table([
    ["Offset", (r) => r.offset],
    ["Timestamp", (r) => [when(r.timestamp), h("div", { class: "small muted" }, r.timestamp_type)]],
    ["Key", (r) => bytesView(r.key, binaryAs, "key")],
    ["Value", (r) => bytesView(r.value, binaryAs, "value")],
    ["Headers", (r) => headersView(r.headers, binaryAs)],
  ], records, { testid: "records", empty: "No records there.", rowid: (r) => String(r.offset) });
}

function encode(kind, text) {
  if (kind === "json") return utf8(JSON.stringify(JSON.parse(text)));
  if (kind === "hex") return fromHex(text);
  if (kind === "base64") return fromBase64(text.trim());
  return utf8(text);
}

function produceForm(state) {
  return form({ class: "stack", "data-testid": "produce" }, [
    h("div", { class: "row" },
      field("Key", "key", { placeholder: "none" }),
      select("Value as", "kind", [["text"], ["json", "JSON"], ["hex", "hex bytes"], ["base64"]])),
    h("label", {}, "Value ", h("textarea", { name: "value", rows: 3 })),
    h("label", {}, "Headers (one name=value a line) ", h("textarea", { name: "headers", rows: 2 })),
  ], "Produce", async (values) => {
    const { topic, partition } = state();
    if (!topic) throw new Error("choose a topic first");
    let value;
    try { value = encode(values.kind, values.value); } catch (error) { throw new Error(`value: ${error.message}`); }
    const headers = values.headers.split("\n").filter((l) => l.trim()).map((line) => {
      const at = line.indexOf("=");
      if (at < 1) throw new Error(`header ${JSON.stringify(line)}: name=value`);
      return { key: line.slice(0, at).trim(), value: toBase64(utf8(line.slice(at + 1))) };
    });
    const record = { value: toBase64(value), headers };
    if (values.key) record.key = toBase64(utf8(values.key));
    const answer = await api.post(`/topics/${api.enc(topic)}/partitions/${partition}`, { records: [record] },
      { type: api.BINARY });
    const written = answer.offsets[0];
    if (written.error) throw new Error(written.error);
    flash(`produced at offset ${written.offset} of ${topic}/${partition}`);
  });
}

export async function render(root, { query }) {
  const topics = await api.get("/topics");
  const chosen = query.get("topic") || topics[0] || "";
  const results = h("div", { "data-testid": "results" });
  const browse = form({ class: "inline", "data-testid": "browse" }, [
    select("Topic", "topic", topics.map((t) => [t])),
    field("Partition", "partition", { type: "number", min: 0, value: query.get("partition") || 0 }),
    select("From", "from", [["last", "the end (last N)"], ["offset", "an offset"], ["timestamp", "a timestamp"]]),
    field("At", "at", { placeholder: "N, offset, or date-time", value: query.get("at") || "" }),
    field("Key contains", "key", { placeholder: "any key" }),
    select("Binary as", "binary", [["hex"], ["base64"]]),
    select("Isolation", "isolation", [["read_uncommitted"], ["read_committed"]]),
  ], "Show records", (values) => showRecords(values));
  async function showRecords(values) {
    const base = `/topics/${api.enc(values.topic)}/partitions/${Number(values.partition)}`;
    replace(results, h("p", { class: "muted" }, "Reading…"));
    try {
      const offset = await api.offsetOf(values.topic, Number(values.partition), values.from, values.at);
      const { records, next } = await read(base, offset, SHOWN_MAX, values.isolation);
      const shown = values.key ? records.filter((r) => keyText(r).includes(values.key)) : records;
      replace(results,
        h("p", { class: "muted", "data-testid": "read-summary" },
          `${shown.length} of ${records.length} records read from offset ${offset}; next offset ${next}`),
        recordsView(shown, values.binary));
    } catch (error) {
      replace(results, errorBox(error));
      throw error;
    }
  }
  browse.querySelector("select[name=topic]").value = chosen;
  if (query.get("from")) browse.querySelector("select[name=from]").value = query.get("from");
  const state = () => ({
    topic: browse.querySelector("[name=topic]").value,
    partition: Number(browse.querySelector("[name=partition]").value),
  });
  replace(root,
    h("h1", {}, "Records"),
    topics.length ? null : h("p", { class: "muted" }, "No topics you may describe."),
    section("Browse", browse, results),
    section("Produce a test record (to the topic and partition above)", produceForm(state)));
  if (query.get("topic")) action(browse.querySelector("button[type=submit]"), () => showRecords(Object.fromEntries(new FormData(browse))));
  return null;
}


