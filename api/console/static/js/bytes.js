// What a record's bytes are shown as: JSON pretty-printed, text as text, anything else as hex or base64.

const strict = new TextDecoder("utf-8", { fatal: true });

export function fromBase64(text) {
  if (text === null || text === undefined) return null;
  const raw = atob(text);
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i += 1) out[i] = raw.charCodeAt(i);
  return out;
}

export function toBase64(bytes) {
  let raw = "";
  for (const b of bytes) raw += String.fromCharCode(b);
  return btoa(raw);
}

export function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(" ");
}

export function fromHex(text) {
  const digits = text.replace(/\s+/g, "");
  if (!/^([0-9a-fA-F]{2})*$/.test(digits)) throw new Error("hex: pairs of digits 0-9 a-f");
  const out = new Uint8Array(digits.length / 2);
  for (let i = 0; i < out.length; i += 1) out[i] = parseInt(digits.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export const utf8 = (text) => new TextEncoder().encode(text);

// {kind: "null" | "json" | "text" | "binary", text}: text is what to show (hex for binary)
export function classify(bytes) {
  if (bytes === null) return { kind: "null", text: "null" };
  let text;
  try {
    text = strict.decode(bytes);
  } catch {
    return { kind: "binary", text: hex(bytes) };
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0008\u000e-\u001f\u007f]/.test(text)) return { kind: "binary", text: hex(bytes) };
  const trimmed = text.trim();
  if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
    try {
      return { kind: "json", text: JSON.stringify(JSON.parse(trimmed), null, 2) };
    } catch { /* text that only looks like JSON */ }
  }
  return { kind: "text", text };
}
