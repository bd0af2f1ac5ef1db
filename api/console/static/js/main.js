// The console's frame: the login (on a node that requires one), the navigation, and the page of the URL's
// hash (#/topics/orders?x=1), refreshed in place by the page's own timer without reloading.

import * as api from "./api.js";
import { h, replace, errorBox } from "./ui.js";
import * as overview from "./pages/overview.js";
import * as topics from "./pages/topics.js";
import * as topic from "./pages/topic.js";
import * as records from "./pages/records.js";
import * as groups from "./pages/groups.js";
import * as group from "./pages/group.js";
import * as security from "./pages/security.js";
import * as operations from "./pages/operations.js";
import * as schemas from "./pages/schemas.js";
import * as subject from "./pages/subject.js";

// #/<name>[/<argument>]: the page module and the nav entry it lights
const PAGES = {
  overview: [overview, overview],
  topics: [topics, topic],
  records: [records, records],
  groups: [groups, group],
  schemas: [schemas, subject],
  security: [security, security],
  operations: [operations, operations],
};

let current = null; // the shown page's handle: {stop()}
let rendering = 0;

function where() {
  const [path, search] = (location.hash.replace(/^#\/?/, "") || "overview").split("?");
  const [name, ...rest] = path.split("/");
  return { name: PAGES[name] ? name : "overview", argument: rest.map(decodeURIComponent).join("/"),
    query: new URLSearchParams(search || "") };
}

async function show() {
  const run = ++rendering;
  if (current && current.stop) current.stop();
  current = null;
  const { name, argument, query } = where();
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.nav === name);
  const [list, one] = PAGES[name];
  const module = argument ? one : list;
  const root = document.getElementById("page");
  replace(root, h("p", { class: "muted" }, "Loading…"));
  // the page renders into its own view, shown only if no later navigation or login replaced it meanwhile
  const view = h("div", { "data-page": argument ? `${name}-one` : name });
  let handle = null;
  try {
    handle = await module.render(view, { argument, query });
  } catch (error) {
    replace(view, errorBox(error));
  }
  if (run !== rendering) {
    if (handle && handle.stop) handle.stop();
    return;
  }
  replace(root, view);
  current = handle || null;
}

function updateWho() {
  const who = api.whoAmI();
  document.getElementById("who").textContent = who ? `as ${who}` : "";
  document.getElementById("logout").hidden = !who;
}

function askLogin(why) {
  const dialog = document.getElementById("login");
  document.getElementById("login-why").textContent = why || "This cluster requires a user.";
  if (!dialog.open) dialog.showModal();
}

async function login(event) {
  event.preventDefault();
  const data = Object.fromEntries(new FormData(event.target));
  const error = document.getElementById("login-error");
  const given = data.token ? { token: data.token.trim() } : { user: data.user.trim(), password: data.password };
  if (!given.token && !given.user) {
    error.textContent = "a user and its password, or a token";
    error.hidden = false;
    return;
  }
  api.setCredentials(given);
  try {
    await api.get("/topics", { quiet401: true });
  } catch (refused) {
    if (refused.status === 401 || refused.status === 429) {
      api.setCredentials(null);
      error.textContent = refused.message;
      error.hidden = false;
      return;
    }
  }
  error.hidden = true;
  event.target.reset();
  document.getElementById("login").close();
  updateWho();
  show();
}

async function start() {
  api.whenUnauthorized((why) => askLogin(why));
  document.getElementById("login-form").addEventListener("submit", login);
  document.getElementById("login").addEventListener("cancel", (event) => event.preventDefault());
  document.getElementById("logout").addEventListener("click", () => {
    api.setCredentials(null);
    updateWho();
    if (current && current.stop) current.stop();
    replace(document.getElementById("page"));
    askLogin("Logged out.");
  });
  window.addEventListener("hashchange", show);
  updateWho();
  try {
    await api.get("/topics", { quiet401: true });
  } catch (refused) {
    if (refused.status === 401) {
      api.setCredentials(null);
      updateWho();
      askLogin("This cluster requires a user: log in with a user and its password, or a token.");
      return;
    }
  }
  show();
}

start();
