// Small DOM helpers: every page builds its nodes with `h`, shows failures with `showError`, and runs a
// button's work through `action` (disabled while it runs, the API's message shown when it fails).

export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "class") node.className = value;
    else if (value === true) node.setAttribute(name, "");
    else node.setAttribute(name, value);
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function replace(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

// columns: [[heading, row => cell], ...]; rows: any list; empty: what an empty table says
export function table(columns, rows, { empty = "none", testid, rowid } = {}) {
  if (!rows.length) return h("p", { class: "muted", "data-testid": testid }, empty);
  return h("table", { "data-testid": testid },
    h("thead", {}, h("tr", {}, columns.map(([name]) => h("th", {}, name)))),
    h("tbody", {}, rows.map((row) =>
      h("tr", { "data-row": rowid ? rowid(row) : null }, columns.map(([, cell]) => h("td", {}, cell(row)))))));
}

export function section(title, ...children) {
  return h("section", {}, h("h2", {}, title), ...children);
}

export function badge(text, kind) {
  return h("span", { class: `badge ${kind || ""}` }, text);
}

export function errorBox(error) {
  return h("p", { class: "error", role: "alert" }, error instanceof Error ? error.message : String(error));
}

let flashTimer = null;
export function flash(text, kind = "ok") {
  const box = document.getElementById("flash");
  box.className = kind;
  box.textContent = text;
  box.hidden = false;
  clearTimeout(flashTimer);
  flashTimer = setTimeout(() => { box.hidden = true; }, kind === "error" ? 15000 : 5000);
}

// Runs work(); while it runs the button is disabled; a failure is shown next to it and in the flash
export async function action(button, work, done) {
  const old = button.parentNode && button.parentNode.querySelector(":scope > .error");
  if (old) old.remove();
  button.disabled = true;
  try {
    const result = await work();
    if (done) flash(typeof done === "function" ? done(result) : done);
    return result;
  } catch (error) {
    button.after(errorBox(error));
    flash(error.message, "error");
    return undefined;
  } finally {
    button.disabled = false;
  }
}

export function form(attrs, fields, submit, onSubmit) {
  const button = h("button", { type: "submit" }, submit);
  const node = h("form", attrs, fields, button);
  node.addEventListener("submit", (event) => {
    event.preventDefault();
    action(button, () => onSubmit(Object.fromEntries(new FormData(node)), node));
  });
  return node;
}

export function field(label, name, attrs = {}) {
  return h("label", {}, label, " ", h("input", { name, ...attrs }));
}

export function select(label, name, options, attrs = {}) {
  return h("label", {}, label, " ",
    h("select", { name, ...attrs }, options.map(([value, text]) => h("option", { value }, text ?? value))));
}

// Asks the person to type `expected` before `work` runs
export function confirmTyped(question, expected) {
  return new Promise((resolve) => {
    const input = h("input", { name: "confirm", "aria-label": "confirmation", autocomplete: "off" });
    const dialog = h("dialog", { class: "confirm" },
      h("form", { method: "dialog" },
        h("p", {}, question), h("p", { class: "muted" }, `Type ${expected} to confirm.`), input,
        h("div", { class: "row" },
          h("button", { value: "cancel", class: "link" }, "Cancel"),
          h("button", { value: "ok", "data-testid": "confirm-ok" }, "Confirm"))));
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "ok" && input.value === expected);
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

export function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n, unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
  return `${unit ? value.toFixed(1) : value} ${units[unit]}`;
}

export function when(ms) {
  if (ms === null || ms === undefined || ms < 0) return "–";
  return new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC");
}

export function duration(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 0) return "forever";
  const units = [["d", 86400000], ["h", 3600000], ["min", 60000], ["s", 1000]];
  for (const [name, size] of units) if (ms >= size && ms % size === 0) return `${ms / size} ${name}`;
  return `${ms} ms`;
}

export function link(href, text) {
  return h("a", { href }, text);
}

// Runs work now and again `ms` after each run ends (never two at once) until stopped
export function every(ms, work) {
  let timer = null, stopped = false;
  const run = async () => {
    try { await work(); } finally { if (!stopped) timer = setTimeout(run, ms); }
  };
  run();
  return { stop() { stopped = true; clearTimeout(timer); } };
}

// A button whose work runs once the person typed `expected` in a confirmation
export function confirmedButton(text, testid, question, expected, work, done, kind = "danger") {
  const node = h("button", { class: kind, "data-testid": testid }, text);
  node.addEventListener("click", async () => {
    if (await confirmTyped(question, expected)) await action(node, work, done);
  });
  return node;
}

// A node's state as gossip tells it: alive, suspect (missed its probes), dead or left; a decommissioned
// node that stopped is expected to be gone (no fault: not in red)
export function gossipBadge(state, decommissioned = false) {
  if (decommissioned && state !== "alive") return badge(`${state} (decommissioned)`, "");
  return badge(state, state === "alive" ? "ok" : state === "suspect" ? "warn" : "bad");
}

// A node's decommission as /v1/nodes says it: under way, finished (it holds no replica), or none
export function decommissionBadge(node) {
  if (node.decommissioned) return badge("decommissioned", "ok");
  return node.decommissioning ? badge("decommissioning", "warn") : "–";
}

// Whether an API call was refused for want of an ACL (403): what the person may not see, not a fault
export function isRefusal(error) {
  return Boolean(error && error.status === 403);
}

// One plain line for what the person logged in may not see (`what`), and the permission it needs
export function notPermitted(what, needs, testid = "not-permitted") {
  return h("p", { class: "muted", "data-testid": testid },
    `${what}: not shown to you (it needs ${needs}; ask an administrator for it).`);
}
