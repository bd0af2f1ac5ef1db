// The console's one way to the node: every call goes through `call`, with the credentials the person gave
// (kept in this tab's sessionStorage only), and every refusal becomes an ApiError carrying the API's message.

const KEY = "raftlog.console.credentials";
const JSON_TYPE = "application/json";
export const BINARY = "application/vnd.kafka.binary.v2+json";

export class ApiError extends Error {
  constructor(status, body, fallback) {
    const code = body && body.error_code ? ` (${body.error_code})` : "";
    const text = body && body.message ? body.message : fallback;
    super(`${status}${code}: ${text}`);
    this.status = status;
    this.body = body;
  }
}

export function credentials() {
  const saved = sessionStorage.getItem(KEY);
  return saved ? JSON.parse(saved) : null;
}

export function setCredentials(value) {
  if (value) sessionStorage.setItem(KEY, JSON.stringify(value));
  else sessionStorage.removeItem(KEY);
}

export function whoAmI() {
  const given = credentials();
  if (!given) return "";
  if (given.user) return given.user;
  return given.token.startsWith("rlt_") ? "a user token" : "a token";
}

function authorization(given) {
  if (!given) return null;
  if (given.user) {
    const bytes = new TextEncoder().encode(`${given.user}:${given.password}`);
    return `Basic ${btoa(String.fromCharCode(...bytes))}`;
  }
  return `Bearer ${given.token}`;
}

let onUnauthorized = () => {};
export function whenUnauthorized(handler) { onUnauthorized = handler; }

// method, path (with its query), and optionally a JSON body, an Accept type, a raw body and its type
export async function call(method, path, { body, accept, raw, type, quiet401 } = {}) {
  const headers = { Accept: accept || JSON_TYPE };
  const auth = authorization(credentials());
  if (auth) headers.Authorization = auth;
  let payload;
  if (raw !== undefined) {
    payload = raw;
    headers["Content-Type"] = type;
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    headers["Content-Type"] = type || JSON_TYPE;
  }
  let response;
  try {
    // credentials "omit": our Authorization header is sent as set, and a 401 never raises the browser's
    // own login prompt (the console asks itself)
    response = await fetch(path, { method, headers, body: payload, cache: "no-store", credentials: "omit" });
  } catch (error) {
    throw new ApiError(0, null, `the node did not answer (${error.message})`);
  }
  const text = await response.text();
  let parsed = null;
  if (text && (response.headers.get("Content-Type") || "").includes("json")) {
    try { parsed = JSON.parse(text); } catch { parsed = null; }
  }
  if (!response.ok) {
    if (response.status === 401 && !quiet401) onUnauthorized(parsed && parsed.message);
    throw new ApiError(response.status, parsed, text.slice(0, 200) || response.statusText);
  }
  return parsed === null ? text : parsed;
}

export const get = (path, options) => call("GET", path, options);
export const post = (path, body, options) => call("POST", path, { ...options, body });
export const del = (path, body, options) => call("DELETE", path, { ...options, body });
export const put = (path, body, options) => call("PUT", path, { ...options, body });
export const patch = (path, body, options) => call("PATCH", path, { ...options, body });

export const enc = encodeURIComponent;
export function query(params) {
  const pairs = Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== "");
  return pairs.length ? "?" + pairs.map(([k, v]) => `${enc(k)}=${enc(v)}`).join("&") : "";
}

// The offset of a partition a person points at: "earliest", "latest", "offset" (`at`, kept within the
// partition's bounds, as Kafka's offset reset keeps it), "last" (`at` records before the end, 20 by
// default) or "timestamp" (`at`: ms since the epoch or a date-time; the end when no record is that late)
export async function offsetOf(topic, partition, where, at) {
  const base = `/topics/${enc(topic)}/partitions/${partition}/offsets`;
  const bounds = await get(base);
  const within = (offset) => Math.min(Math.max(offset, bounds.beginning_offset), bounds.end_offset);
  if (where === "earliest") return bounds.beginning_offset;
  if (where === "latest") return bounds.end_offset;
  if (where === "offset") return within(Number(at || 0));
  if (where === "last") return within(bounds.end_offset - Number(at || 20));
  const ms = /^\d+$/.test(at) ? Number(at) : Date.parse(at);
  if (Number.isNaN(ms)) throw new Error(`timestamp ${JSON.stringify(at)}: ms since the epoch or a date-time`);
  const found = await get(base + query({ timestamp: ms }));
  return found.offset ?? bounds.end_offset;
}
