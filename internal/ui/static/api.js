// api.js: the node's HTTP API with the tab's bearer token.

const TOKEN_KEY = "fencer.token";

// The token lives in sessionStorage only: it is gone when the tab closes and
// is never written to localStorage or a cookie.
export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(t) {
  sessionStorage.setItem(TOKEN_KEY, t);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

export function authHeaders() {
  const t = token();
  return t ? { Authorization: "Bearer " + t } : {};
}

// APIError is a refusal: the HTTP status, the machine-readable code of the
// body ({"error","code"}) and its message.
export class APIError extends Error {
  constructor(status, code, message, body) {
    super(message);
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

// api sends one request and returns {data, headers}; a refusal throws an
// APIError, a network failure or timeout a TypeError or AbortError.
export async function api(path, { method = "GET", body, timeout = 8000 } = {}) {
  const headers = { Accept: "application/json", ...authHeaders() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), timeout);
  let resp, text;
  try {
    resp = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: ctl.signal,
      cache: "no-store",
      credentials: "omit",
    });
    text = await resp.text();
  } finally {
    clearTimeout(timer);
  }
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!resp.ok) {
    const code = (data && data.code) || "";
    const msg = (data && data.error) || `${resp.status} ${resp.statusText}`;
    throw new APIError(resp.status, code, msg, data);
  }
  return { data, headers: resp.headers };
}

// notServed tells a route this node does not have (a build from before it)
// from a 404 about the thing asked for.
export function notServed(err) {
  return err instanceof APIError && err.status === 404 && err.code === "not_found";
}

export function enc(s) {
  return encodeURIComponent(s);
}
