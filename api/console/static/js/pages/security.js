// Security: users (created, given a new password, deleted), their API tokens (made, shown once, revoked)
// and ACLs (listed by filter, created, deleted), all through /v1 as the logged-in caller.

import * as api from "../api.js";
import { h, replace, section, table, errorBox, badge, when, form, field, select, flash, action, confirmedButton } from "../ui.js";

const OPERATIONS = ["read", "write", "create", "delete", "alter", "describe", "describe_configs", "alter_configs",
  "cluster_action", "idempotent_write", "all"];
const RESOURCES = ["topic", "group", "cluster", "transactional_id"];

function rerender() { window.dispatchEvent(new HashChangeEvent("hashchange")); }

function usersSection(users) {
  const tokens = h("div", { "data-testid": "tokens" });
  const showTokens = async (user) => {
    replace(tokens, h("p", { class: "muted" }, "Loading…"));
    try {
      const listed = await api.get(`/v1/users/${api.enc(user)}/tokens`);
      const created = h("div", { "data-testid": "token-created" });
      replace(tokens, h("h3", {}, `Tokens of ${user}`), table([
        ["Id", (t) => h("code", {}, t.id)],
        ["Description", (t) => t.description || "–"],
        ["Created", (t) => when(t.created_ms)],
        ["Expires", (t) => (t.expires_ms ? [when(t.expires_ms), t.expired ? badge("expired", "bad") : null] : "never")],
        ["", (t) => {
          const button = h("button", { class: "danger small", "data-testid": `revoke-${t.id}` }, "Revoke");
          button.addEventListener("click", () => action(button, async () => {
            await api.del(`/v1/users/${api.enc(user)}/tokens/${api.enc(t.id)}`);
            flash(`token ${t.id} of ${user} revoked`);
            showTokens(user);
          }));
          return button;
        }],
      ], listed.tokens, { empty: "No tokens.", testid: "token-list" }),
      form({ class: "inline", "data-testid": "create-token" }, [
        field("Description", "description"),
        field("Lifetime (days)", "days", { type: "number", min: 1, placeholder: "until revoked" }),
      ], "Create token", async (values) => {
        const body = {};
        if (values.description) body.description = values.description;
        if (values.days) body.lifetime_ms = Number(values.days) * 86400000;
        const made = await api.post(`/v1/users/${api.enc(user)}/tokens`, body);
        await showTokens(user);
        replace(tokens.querySelector("[data-testid=token-created]") || created,
          h("p", {}, "The token, shown this once (only its hash is kept): "), h("code", { class: "secret" }, made.token));
      }), created);
    } catch (error) {
      replace(tokens, errorBox(error));
    }
  };
  const list = table([
    ["User", (u) => h("strong", {}, u.name)],
    ["Mechanisms", (u) => u.mechanisms.join(", ")],
    ["", (u) => {
      const view = h("button", { class: "small" }, "Tokens");
      view.addEventListener("click", () => showTokens(u.name));
      const remove = confirmedButton("Delete", `delete-user-${u.name}`, `Delete user ${u.name} and revoke its tokens?`,
        u.name, async () => {
          await api.del(`/v1/users/${api.enc(u.name)}`);
          rerender();
        }, `user ${u.name} deleted`, "danger small");
      return [view, " ", remove];
    }],
  ], users, { testid: "users", empty: "No users.", rowid: (u) => u.name });
  const create = form({ class: "inline", "data-testid": "set-user" }, [
    field("User", "name", { required: true, autocomplete: "off" }),
    field("Password", "password", { type: "password", required: true, autocomplete: "new-password" }),
  ], "Create user or set password", async (values) => {
    const answer = await api.post("/v1/users", { name: values.name, password: values.password });
    flash(answer.created ? `user ${values.name} created` : `password of ${values.name} set`);
    rerender();
  });
  return section("Users", list, create, tokens);
}

function aclKey(acl) {
  return [acl.resource_type, acl.pattern_type, acl.name, acl.principal, acl.host, acl.operation, acl.permission].join("|");
}

function aclsSection(acls) {
  const list = table([
    ["Principal", (a) => a.principal],
    ["Resource", (a) => `${a.resource_type} ${a.pattern_type === "prefixed" ? `${a.name}*` : a.name}`],
    ["Operation", (a) => a.operation],
    ["Permission", (a) => badge(a.permission, a.permission === "allow" ? "ok" : "bad")],
    ["Host", (a) => a.host],
    ["", (a) => {
      const remove = h("button", { class: "danger small" }, "Delete");
      remove.addEventListener("click", () => action(remove, async () => {
        const { resource_type, name, pattern_type, principal, host, operation, permission } = a;
        await api.del("/v1/acls", { filters: [{ resource_type, name, pattern_type, principal, host, operation, permission }] });
        flash("ACL deleted");
        rerender();
      }));
      return remove;
    }],
  ], acls, { testid: "acls", empty: "No ACLs.", rowid: aclKey });
  const create = form({ class: "inline", "data-testid": "create-acl" }, [
    field("Principal", "principal", { required: true, placeholder: "User:alice" }),
    select("Resource", "resource_type", RESOURCES.map((r) => [r])),
    field("Name", "name", { required: true, placeholder: "orders, *, kafka-cluster" }),
    select("Pattern", "pattern_type", [["literal"], ["prefixed"]]),
    select("Operation", "operation", OPERATIONS.map((o) => [o])),
    select("Permission", "permission", [["allow"], ["deny"]]),
    field("Host", "host", { value: "*" }),
  ], "Create ACL", async (values) => {
    await api.post("/v1/acls", { acls: [values] });
    flash("ACL created");
    rerender();
  });
  return section("ACLs", list, create);
}

export async function render(root) {
  const [users, acls] = await Promise.allSettled([api.get("/v1/users"), api.get("/v1/acls")]);
  replace(root, h("h1", {}, "Security"),
    users.status === "fulfilled" ? usersSection(users.value.users) : section("Users", errorBox(users.reason)),
    acls.status === "fulfilled" ? aclsSection(acls.value.acls) : section("ACLs", errorBox(acls.reason)));
  return null;
}
