// Topics: every topic the caller may describe, with its partitions, replication, size, retention and
// cleanup policy; and a form that creates one.

import * as api from "../api.js";
import {
  h, replace, section, table, errorBox, bytes, duration, link, form, field, select, flash, isRefusal, notPermitted,
} from "../ui.js";

const SIZE_CALLS = 6; // partition states asked at once while sizes fill in

export function configText(configs, name, show = (v) => v) {
  return configs && configs[name] !== undefined ? String(show(configs[name])) : "default";
}

// A topic's config as the topics table shows it: "–" when its description was refused (a 403: the value
// is unknown to the person, not the default)
function configCell(t, name, show) {
  if (t.error) return isRefusal(t.error) ? h("span", { class: "muted" }, "–") : "";
  return configText(t.configs, name, show);
}

// Reads every partition's state (leader's view), a few at a time; fills `into[topic]` as they come
export async function partitionStates(names, partitionsOf, onState) {
  const work = names.flatMap((name) => [...Array(partitionsOf(name)).keys()].map((p) => [name, p]));
  const next = async () => {
    for (let item = work.shift(); item; item = work.shift()) {
      const [name, p] = item;
      try {
        onState(name, p, await api.get(`/v1/partitions/${api.enc(name)}/${p}`));
      } catch (error) {
        onState(name, p, null, error);
      }
    }
  };
  await Promise.all([...Array(SIZE_CALLS)].map(next));
}

function createForm() {
  return form({ class: "inline", "data-testid": "create-topic" }, [
    field("Name", "name", { required: true, pattern: "[A-Za-z0-9._\\-]{1,200}" }),
    field("Partitions", "partitions", { type: "number", min: 1, value: 3 }),
    field("Replication", "replication_factor", { type: "number", min: 1, value: 3 }),
    field("Retention ms", "retention", { type: "number", placeholder: "default" }),
    select("Cleanup", "cleanup", [["", "default"], ["delete"], ["compact"], ["compact,delete"]]),
  ], "Create topic", async (values) => {
    const configs = {};
    if (values.retention) configs["retention.ms"] = Number(values.retention);
    if (values.cleanup) configs["cleanup.policy"] = values.cleanup;
    await api.post("/v1/topics", {
      name: values.name, partitions: Number(values.partitions),
      replication_factor: Number(values.replication_factor), configs,
    });
    flash(`topic ${values.name} created`);
    location.hash = `#/topics/${api.enc(values.name)}`;
  });
}

export async function render(root) {
  const listing = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  replace(root, h("h1", {}, "Topics"), section("Create a topic", createForm()), section("Topics", listing));
  let names;
  try {
    names = await api.get("/topics");
  } catch (error) {
    replace(listing, errorBox(error));
    return null;
  }
  const described = await Promise.all(names.map(async (name) => {
    try { return { name, ...(await api.get(`/topics/${api.enc(name)}`)) }; } catch (error) { return { name, error }; }
  }));
  const sizes = Object.fromEntries(names.map((n) => [n, { bytes: 0, known: 0 }]));
  const cells = {};
  const sizeCell = (t) => (t.error ? "–" : (cells[t.name] = h("span", { "data-testid": `size-${t.name}` }, "…")));
  const refused = described.filter((t) => isRefusal(t.error)).map((t) => t.name);
  replace(listing, table([
    ["Topic", (t) => link(`#/topics/${api.enc(t.name)}`, t.name)],
    ["Partitions", (t) => (!t.error ? t.partitions.length : isRefusal(t.error) ? h("span", { class: "muted" }, "–")
      : errorBox(t.error))],
    ["Replication", (t) => t.replication_factor ?? "–"],
    ["Size", sizeCell],
    ["Retention", (t) => configCell(t, "retention.ms", duration)],
    ["Cleanup policy", (t) => configCell(t, "cleanup.policy")],
  ], described, { testid: "topics", empty: "No topics you may describe.", rowid: (t) => t.name }),
  refused.length ? notPermitted(`The partitions and configs of ${refused.join(", ")}`,
    "DESCRIBE and DESCRIBE_CONFIGS on the topic", "topics-not-permitted") : null);
  const counts = Object.fromEntries(described.map((t) => [t.name, t.error ? 0 : t.partitions.length]));
  partitionStates(names, (n) => counts[n], (name, p, state) => {
    const size = sizes[name];
    size.known += 1;
    size.bytes += state && state.log_bytes ? state.log_bytes : 0;
    if (cells[name]) cells[name].textContent = bytes(size.bytes) + (size.known < counts[name] ? " …" : "");
  });
  return null;
}
