// Operations: leadership transfers, replica moves with live progress, maintenance, decommission with
// progress, and the controller group's voters. The state parts refresh every two seconds; the forms stay.

import * as api from "../api.js";
import {
  h, replace, section, table, errorBox, badge, form, field, flash, action, every, confirmedButton, gossipBadge,
} from "../ui.js";

function button(text, testid, work, done, kind = "small") {
  const node = h("button", { class: kind, "data-testid": testid }, text);
  node.addEventListener("click", () => action(node, work, done));
  return node;
}

function controllerView(controller) {
  return [
    h("p", { "data-testid": "controller" }, "Leader ", h("strong", {}, controller.leader || "none"),
      `, term ${controller.term}, commit index ${controller.commit_index}`,
      controller.pending ? [" — ", badge(`change in progress: ${JSON.stringify(controller.pending)}`, "warn")] : null),
    table([
      ["Node", (m) => m.node],
      ["Role", (m) => badge(m.role, m.role === "learner" ? "warn" : "ok")],
      ["Match index", (m) => m.match ?? "–"],
      ["", (m) => (m.role === "voter" ? confirmedButton("Remove voter", `remove-voter-${m.node}`,
        `Remove ${m.node} from the controller group?`, m.node,
        () => api.del(`/v1/controller/voters/${api.enc(m.node)}`), `removing ${m.node} from the controller group`,
        "small danger") : null)],
    ], [...controller.voters.map((node) => ({ node, role: "voter", match: controller.match_index[node] })),
      ...controller.learners.map((node) => ({ node, role: "learner", match: controller.match_index[node] }))],
    { testid: "controller-members" }),
  ];
}

function decommissionView(progress) {
  if (!progress) return "–";
  if (progress.error) return errorBox(progress.error);
  const text = progress.done ? "done: no replica left"
    : `${progress.replicas_remaining} replicas left, ${progress.moving.length} moving`;
  return h("div", { "data-testid": `decommission-${progress.node_id}` },
    badge(text, progress.done ? "ok" : "warn"),
    progress.blocked && progress.blocked.length
      ? h("div", { class: "small error" }, `blocked: ${JSON.stringify(progress.blocked)}`) : null);
}

function nodesView(nodes, progress) {
  return table([
    ["Node", (n) => h("strong", {}, n.node_id)],
    ["State", (n) => gossipBadge(n.state, n.decommissioned)],
    ["Leads", (n) => n.leader_of],
    ["Maintenance", (n) => (n.maintenance
      ? button("End maintenance", `maintenance-off-${n.node_id}`,
        () => api.del(`/v1/nodes/${api.enc(n.node_id)}/maintenance`), `${n.node_id} may lead again`)
      : button("Start maintenance", `maintenance-on-${n.node_id}`,
        () => api.put(`/v1/nodes/${api.enc(n.node_id)}/maintenance`), `${n.node_id} drained of leadership`))],
    ["Decommission", (n) => (n.decommissioning
      ? [decommissionView(progress[n.node_id]), " ", button("Recommission", `recommission-${n.node_id}`,
        () => api.del(`/v1/nodes/${api.enc(n.node_id)}/decommission`), `${n.node_id} recommissioned`)]
      : confirmedButton("Decommission", `decommission-start-${n.node_id}`, `Move every replica off ${n.node_id}?`,
        n.node_id, () => api.put(`/v1/nodes/${api.enc(n.node_id)}/decommission`), `decommissioning ${n.node_id}`,
        "small danger"))],
  ], nodes, { testid: "operations-nodes", rowid: (n) => n.node_id });
}

function moveView(state) {
  const done = !state.move;
  return h("div", { class: "move", "data-testid": `move-${state.topic}-${state.partition}`, "data-done": String(done) },
    h("strong", {}, `${state.topic}/${state.partition}: `),
    done ? badge(`done: replicas ${state.replicas.join(", ")}`, "ok")
      : [badge(`moving ${state.move.original.join(", ")} → ${state.move.target.join(", ")}`, "warn"),
        state.move.adding ? ` adding ${state.move.adding}` : "",
        " ", button("Cancel", `cancel-move-${state.topic}-${state.partition}`,
          () => api.del(`/v1/partitions/${api.enc(state.topic)}/${state.partition}/replicas`), "move cancelled")]);
}

export async function render(root, { query }) {
  const controller = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const nodes = h("div");
  const moves = h("div", { "data-testid": "moves" });
  const watched = new Map(); // "topic/partition" -> [topic, partition]: moves started here, or in progress
  const topic = query.get("topic") || "";
  const partition = query.get("partition") || "";
  const transfer = form({ class: "inline", "data-testid": "transfer-leadership" }, [
    field("Topic", "topic", { required: true, value: topic }),
    field("Partition", "partition", { type: "number", min: 0, required: true, value: partition }),
    field("To node", "target", { placeholder: "any caught-up replica" }),
  ], "Transfer leadership", async (values) => {
    const answer = await api.post(`/v1/partitions/${api.enc(values.topic)}/${Number(values.partition)}/transfer_leadership` +
      api.query({ target: values.target }));
    flash(`${answer.topic}/${answer.partition} is led by ${answer.leader}`);
  });
  const move = form({ class: "inline", "data-testid": "move-replicas" }, [
    field("Topic", "topic", { required: true, value: topic }),
    field("Partition", "partition", { type: "number", min: 0, required: true, value: partition }),
    field("Replicas", "replicas", { required: true, placeholder: "n1,n2,n4" }),
  ], "Move replicas", async (values) => {
    const replicas = values.replicas.split(",").map((r) => r.trim()).filter(Boolean);
    const p = Number(values.partition);
    await api.post(`/v1/partitions/${api.enc(values.topic)}/${p}/replicas`, { replicas });
    watched.set(`${values.topic}/${p}`, [values.topic, p]);
    flash(`moving ${values.topic}/${p} to ${replicas.join(", ")}`);
  });
  const voter = form({ class: "inline", "data-testid": "add-voter" }, [field("Node", "node_id", { required: true })],
    "Add controller voter", async (values) => {
      await api.post("/v1/controller/voters", { node_id: values.node_id });
      flash(`${values.node_id} joins the controller group`);
    });
  replace(root, h("h1", {}, "Operations"),
    section("Leadership", transfer),
    section("Replica moves", move, moves),
    section("Nodes: maintenance and decommission", nodes),
    section("Controller group", controller, voter));
  return every(2000, async () => {
    const [c, n, health] = await Promise.allSettled([
      api.get("/v1/controller"), api.get("/v1/nodes"), api.get("/v1/cluster/health")]);
    replace(controller, c.status === "fulfilled" ? controllerView(c.value) : errorBox(c.reason));
    if (n.status === "fulfilled") {
      const progress = {};
      await Promise.all(n.value.filter((x) => x.decommissioning).map(async (x) => {
        try {
          progress[x.node_id] = await api.get(`/v1/nodes/${api.enc(x.node_id)}/decommission`);
        } catch (error) {
          progress[x.node_id] = { error };
        }
      }));
      replace(nodes, nodesView(n.value, progress));
    } else {
      replace(nodes, errorBox(n.reason));
    }
    if (health.status === "fulfilled") {
      for (const m of health.value.moving_partitions || []) watched.set(`${m.topic}/${m.partition}`, [m.topic, m.partition]);
    }
    const states = await Promise.all([...watched.values()].map(async ([t, p]) => {
      try { return moveView(await api.get(`/v1/partitions/${api.enc(t)}/${p}/replicas`)); } catch (error) { return errorBox(error); }
    }));
    replace(moves, states.length ? states : h("p", { class: "muted" }, "No move in progress."));
  });
}
