// app.js: the dashboard. It reads the node it was loaded from:
//   GET /v1/whoami              who the token is (what to offer)
//   GET /v1/cluster             this node's view: leader, term, indexes, epoch
//   GET /v1/cluster/members     every member's own view, gathered by the node
//   GET /v1/locks, /v1/semaphores, /v1/sessions, then /v1/events from the
//                               locks list's index
//   GET /v1/locks/{name}/history, /v1/tokens/{token} on request
// The cluster is polled every second (leadership changes are not events);
// locks, semaphores and sessions are re-read when an event says they
// changed, and every few seconds for what no event reports (waiters, time
// left, a session's renewals). Sessions are also kept from the events
// themselves: one that ended leaves the view with the event that ended it,
// whatever a list read that was under way says.

import { api, APIError, token, setToken, clearToken, notServed, enc } from "./api.js";
import { EventStream } from "./sse.js";
import { $, h, text, message, duration, reconcile } from "./dom.js";

const CLUSTER_EVERY = 1000;
const LOCKS_EVERY = 3000;
const FEED_MAX = 150;

const state = {
  gen: 0, // bumped on sign-out: loops of an older generation stop
  who: null,
  cluster: null,
  clusterSeq: 0,
  clusterShown: 0,
  locks: [],
  sems: [],
  sessions: new Map(), // id -> the session as GET /v1/sessions gives it, with the time it was read (at)
  // Sessions and grants the events said ended: a list read begun before
  // such an event must not bring them back (ids and tokens are never
  // reused). Bounded: only a read in flight can be that old.
  endedSessions: new Set(),
  endedTokens: new Set(),
  seen: new Set(), // lock:token pairs and sessions already shown, to flash new rows
  stream: null,
  locksTimer: 0,
  filter: "",
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const isOperator = () => state.who && state.who.role === "operator";

// ---------- signing in ----------

function showLogin(msg) {
  $("#dash").hidden = true;
  $("#who").hidden = true;
  $("#login").hidden = false;
  $("#login-error").textContent = msg || "";
  setConn("down", "Sign in to see this cluster");
  $("#token-input").focus();
}

async function signIn() {
  const gen = state.gen;
  for (;;) {
    try {
      const { data } = await api("/v1/whoami");
      state.who = data;
      break;
    } catch (err) {
      if (gen !== state.gen) return;
      if (err instanceof APIError && err.status === 401) {
        const had = token() !== "";
        clearToken();
        showLogin(had ? `The node refused this token (401 ${err.code}): ${err.message}` : "");
        return;
      }
      if (notServed(err)) {
        // A node from before /v1/whoami: offer nothing but reading.
        state.who = { acl: token() !== "", role: "reader", name: "" };
        break;
      }
      setConn("down", `This node does not answer: ${err.message}`);
      await sleep(2000);
    }
  }
  startDashboard(gen);
}

function signOut(msg) {
  state.gen++;
  if (state.stream) state.stream.stop();
  clearTimeout(state.locksTimer);
  clearToken();
  state.who = null;
  clearView();
  showLogin(msg);
}

// clearView forgets everything the last token was shown, so that the next
// one to sign in in this tab sees only what it may read.
function clearView() {
  state.cluster = null;
  state.locks = [];
  state.sems = [];
  state.sessions.clear();
  state.endedSessions.clear();
  state.endedTokens.clear();
  state.seen.clear();
  for (const sel of ["#members tbody", "#locks tbody", "#semaphores tbody", "#sessions tbody", "#feed", "#token-answer", "#history-answer", "#cluster-ops"]) {
    $(sel).replaceChildren();
  }
  for (const sel of ["#leader", "#term", "#commit", "#applied", "#epoch", "#last-token", "#log-format", "#node"]) text(sel, "");
  $("#leader").dataset.leader = "";
  for (const sel of ["#token-lookup", "#history-lock", "#lock-filter"]) $(sel).value = "";
  state.filter = "";
  for (const sel of ["#cluster-msg", "#members-msg", "#locks-msg", "#sems-msg", "#sessions-msg"]) message(sel, "");
  $("#feed-empty").hidden = false;
  const ev = $("#events-state");
  ev.dataset.state = "connecting";
  text(ev, "connecting");
  banner("");
}

// authLost handles a 401 after signing in (the token was taken out of the
// ACL file): back to the prompt, saying why.
function authLost(err) {
  signOut(`The node no longer accepts this token (401 ${err.code}): ${err.message}`);
}

// ---------- the page ----------

function startDashboard(gen) {
  $("#login").hidden = true;
  $("#dash").hidden = false;
  const who = state.who;
  $("#who").hidden = false;
  text("#who-name", who.acl ? who.name || "token" : "no access control");
  text("#who-role", who.acl ? who.role : "open");
  $("#sign-out").hidden = !who.acl;
  $("#who-role").title = who.acl
    ? `role ${who.role}` + (who.locks ? `, locks ${who.locks.join(", ")}` : "") + (who.keys ? `, keys ${who.keys.join(", ")}` : "")
    : "This cluster has no ACL: anyone who reaches it may do anything.";
  document.querySelector(".op-col").hidden = !isOperator();
  renderClusterOps();
  clusterLoop(gen);
  listLocks(gen, true);
}

function setConn(s, msg) {
  const el = $("#conn");
  el.dataset.state = s;
  text(el, msg);
}

function banner(msg, kind = "error") {
  const el = $("#banner");
  el.hidden = !msg;
  el.dataset.kind = kind;
  el.textContent = msg || "";
}

// refusal words a 403 for a section.
function refusal(err, what) {
  if (err instanceof APIError && err.status === 403) {
    return `Your token (role ${state.who ? state.who.role : "?"}) may not read ${what}: ${err.message}`;
  }
  if (err instanceof APIError) return `${what}: ${err.status} ${err.code}: ${err.message}`;
  return `${what}: ${err.message || err}`;
}

// ---------- cluster ----------

async function clusterLoop(gen) {
  while (gen === state.gen) {
    await pollCluster(gen);
    await sleep(CLUSTER_EVERY);
  }
}

async function pollCluster(gen) {
  // Polls overlap (the loop, and after events): an answer older than one
  // already shown is dropped.
  const seq = ++state.clusterSeq;
  const [st, ms] = await Promise.allSettled([api("/v1/cluster", { timeout: 4000 }), api("/v1/cluster/members", { timeout: 4000 })]);
  if (gen !== state.gen || seq < state.clusterShown) return;
  state.clusterShown = seq;
  for (const r of [st, ms]) {
    if (r.status === "rejected" && r.reason instanceof APIError && r.reason.status === 401) {
      authLost(r.reason);
      return;
    }
  }
  if (st.status === "fulfilled") {
    state.cluster = st.value.data;
    renderCluster(state.cluster);
    message("#cluster-msg", "");
    const c = state.cluster;
    setConn("live", `Live · from ${c.node} (${c.state.toLowerCase()})`);
  } else {
    const err = st.reason;
    if (err instanceof APIError) {
      message("#cluster-msg", refusal(err, "the cluster's status"));
    } else {
      setConn("down", `This node does not answer (${err.name === "AbortError" ? "timed out" : err.message}); retrying`);
    }
  }
  if (ms.status === "fulfilled") {
    renderMembers(ms.value.data.members);
    message("#members-msg", "");
  } else if (notServed(ms.reason) && state.cluster) {
    // A node from before /v1/cluster/members: its own record of each.
    renderMembers(state.cluster.members.map((m) => ({ ...m, state: m.leader ? "Leader" : "" })));
    message("#members-msg", "This node does not gather the members' own views (its fencer predates GET /v1/cluster/members).");
  } else if (ms.status === "rejected" && ms.reason instanceof APIError) {
    message("#members-msg", refusal(ms.reason, "the members' status"));
  }
}

function renderCluster(c) {
  text("#leader", c.leader || "none: electing");
  $("#leader").dataset.leader = c.leader || "";
  text("#term", c.term);
  text("#commit", c.commit_index);
  text("#applied", c.applied_index);
  text("#epoch", c.epoch);
  text("#last-token", c.last_token);
  text("#log-format", c.log_format);
  $("#node").replaceChildren(c.node, " ", h("small", {}, c.state.toLowerCase()));
}

function renderClusterOps() {
  const ops = $("#cluster-ops");
  ops.replaceChildren();
  if (!isOperator()) return;
  ops.append(
    h("button", { type: "button", id: "transfer-leader", class: "op", onclick: () => transfer("") }, "Transfer leadership…"),
  );
}

// parseGoDuration reads Go's time.Duration strings ("7.4ms", "1m2.5s",
// "0", "never") as milliseconds; null when it cannot.
function parseGoDuration(s) {
  if (!s) return null;
  if (s === "0") return 0;
  const units = { h: 3600e3, m: 60e3, s: 1e3, ms: 1, us: 1e-3, "µs": 1e-3, ns: 1e-6 };
  let total = 0;
  let matched = false;
  for (const [, num, unit] of s.matchAll(/([0-9.]+)(h|ms|m|s|us|µs|ns)/g)) {
    total += parseFloat(num) * units[unit];
    matched = true;
  }
  return matched ? total : null;
}

function health(m, maxCommit) {
  switch (m.state) {
    case "unreachable":
      return ["unreachable", "bad", m.error];
    case "unknown":
      return ["unknown", "warn", m.error];
    case "Candidate":
      return ["electing", "warn", "standing for election"];
    case "Shutdown":
      return ["stopped", "bad", ""];
    case "":
      return ["not asked", "warn", ""];
  }
  if (!m.sees_leader) return ["no leader", "bad", "knows no leader"];
  const contact = parseGoDuration(m.last_contact);
  if (m.state === "Follower" && contact != null && contact > 5000) return ["lagging", "warn", `last heard from the leader ${duration(contact)} ago`];
  if (maxCommit - (m.applied_index || 0) > 1000) return ["behind", "warn", `${maxCommit - m.applied_index} entries behind`];
  return ["healthy", "ok", ""];
}

function contactText(m) {
  if (m.state === "Leader") return "leads";
  if (m.last_contact === "never") return "never";
  const ms = parseGoDuration(m.last_contact);
  return ms == null ? m.last_contact || "–" : `${duration(ms)} ago`;
}

function renderMembers(members) {
  const op = isOperator();
  const maxCommit = Math.max(0, ...members.map((m) => m.commit_index || 0));
  const rows = members.map((m) => ({ ...m, health: health(m, maxCommit), isLeader: m.leader || m.state === "Leader" }));
  // A row is rebuilt only when what it offers changes; the counters are
  // updated in place, so a focused button is not replaced every second.
  const key = (m) => JSON.stringify([m.id, m.http_addr, m.raft_addr, m.voter, m.isLeader, m.state === "unreachable", op]);
  reconcile($("#members tbody"), rows, key, (m) => memberRow(m, op), updateMember);
  text("#members-count", `${members.length} member${members.length === 1 ? "" : "s"}`);
}

function memberRow(m, op) {
  const row = h(
    "tr",
    { dataset: { member: m.id } },
    h(
      "td",
      {},
      h("strong", { class: "member-id" }, m.id),
      " ",
      m.isLeader ? h("span", { class: "badge leader" }, "leader") : null,
      h("span", { class: "addr", title: "HTTP address" }, m.http_addr || "?"),
      h("span", { class: "addr", title: "Raft address" }, m.raft_addr),
    ),
    h("td", { class: "health" }, h("span", { class: "badge" })),
    h("td", { class: "state" }),
    h("td", { class: "num term" }),
    h("td", { class: "num indexes" }),
    h("td", { class: "contact" }),
    h("td", { class: "num format" }),
    op ? h("td", {}, memberActions(m, m.isLeader)) : null,
  );
  updateMember(row, m);
  return row;
}

function updateMember(row, m) {
  const [hl, cls, why] = m.health;
  const badge = row.querySelector(".health .badge");
  badge.className = `badge ${cls}`;
  badge.title = why || "";
  text(badge, hl);
  text(row.querySelector(".state"), `${m.state ? m.state.toLowerCase() : "–"} · ${m.voter ? "voter" : "non-voter"}`);
  text(row.querySelector(".term"), m.term);
  text(row.querySelector(".indexes"), `${m.commit_index ?? "–"} / ${m.applied_index ?? "–"}`);
  const contact = row.querySelector(".contact");
  text(contact, contactText(m));
  contact.title = m.error || m.last_contact || "";
  text(row.querySelector(".format"), m.log_format);
}

function memberActions(m, leader) {
  return h(
    "div",
    { class: "actions" },
    !leader && m.voter && m.state !== "unreachable"
      ? h("button", { type: "button", class: "small op", "aria-label": `Make ${m.id} the leader`, onclick: () => transfer(m.id) }, "Make leader")
      : null,
    h("button", { type: "button", class: "small op", "aria-label": `Remove member ${m.id}`, onclick: () => removeMember(m.id) }, "Remove"),
  );
}

// ---------- operator actions ----------

function confirmAction(title, body, ok) {
  const dlg = $("#confirm");
  text("#confirm-title", title);
  text("#confirm-text", body);
  text("#confirm-ok", ok);
  dlg.returnValue = "";
  dlg.showModal();
  // A close event is dispatched after the dialog closed: one from its
  // previous opening may still arrive while it is open again, and must not
  // answer this question.
  return new Promise((resolve) => {
    const onClose = () => {
      if (dlg.open) return;
      dlg.removeEventListener("close", onClose);
      resolve(dlg.returnValue === "ok");
    };
    dlg.addEventListener("close", onClose);
  });
}

async function transfer(id) {
  const cur = state.cluster ? state.cluster.leader : "?";
  const to = id || "the most up-to-date follower";
  const yes = await confirmAction(
    "Transfer leadership?",
    `Leadership moves from ${cur} to ${to}. Requests pause for a moment while the new leader takes over; leases are kept.`,
    "Transfer leadership",
  );
  if (!yes) return;
  banner(`Transferring leadership to ${to}…`, "info");
  try {
    const { data } = await api("/v1/cluster/leader/transfer", { method: "POST", body: id ? { id } : {}, timeout: 20000 });
    banner(`Leadership transferred${data && data.to ? " to " + data.to : ""}.`, "info");
  } catch (err) {
    if (err instanceof APIError && err.status === 401) return authLost(err);
    banner(`Transfer refused: ${err instanceof APIError ? `${err.status} ${err.code}: ` : ""}${err.message}`);
  }
  pollCluster(state.gen);
}

async function removeMember(id) {
  const yes = await confirmAction(
    `Remove member ${id}?`,
    `${id} leaves the cluster's configuration and stops voting. To bring it back, wipe its data dir and join it again. Removing a voter of a 3-member cluster leaves no room for another failure.`,
    `Remove ${id}`,
  );
  if (!yes) return;
  try {
    await api(`/v1/cluster/members/${enc(id)}`, { method: "DELETE", timeout: 20000 });
    banner(`Member ${id} removed.`, "info");
  } catch (err) {
    if (err instanceof APIError && err.status === 401) return authLost(err);
    banner(`Removing ${id} refused: ${err instanceof APIError ? `${err.status} ${err.code}: ` : ""}${err.message}`);
  }
  pollCluster(state.gen);
}

// revoke ends another's grant (kind "locks" or "semaphores", with its
// token) or a session (kind "sessions"), as its expiry would: operators
// only, behind a confirmation. The events that follow redraw the tables.
async function revoke(kind, name, token, holder) {
  const what = kind === "sessions" ? `session ${name}` : `${kind === "locks" ? "lock" : "semaphore"} ${name}'s grant t${token}`;
  const yes = await confirmAction(
    `Revoke ${what}?`,
    kind === "sessions"
      ? `Session ${name} of ${holder} ends now with every grant under it, as if it expired: their lock-delays start and waiters get the names. Its holder learns at its next renewal (410 revoked); its fenced writes are refused.`
      : `${holder}'s grant t${token} ends now, as if it expired: its lock-delay starts, or the next waiter gets it. The holder learns at its next renewal (410 revoked); its fenced writes with t${token} are refused.`,
    "Revoke",
  );
  if (!yes) return;
  const path = kind === "sessions" ? `/v1/sessions/${enc(name)}/revoke` : `/v1/${kind}/${enc(name)}/revoke`;
  try {
    await api(path, { method: "POST", body: kind === "sessions" ? {} : { token }, timeout: 20000 });
    banner(`Revoked ${what}.`, "info");
  } catch (err) {
    if (err instanceof APIError && err.status === 401) return authLost(err);
    banner(`Revoking ${what} refused: ${err instanceof APIError ? `${err.status} ${err.code}: ` : ""}${err.message}`);
  }
  scheduleList();
}

// revokeButton is the operators' revoke button of one grant or session,
// after a space; nothing for anyone else.
function revokeButton(kind, name, token, holder) {
  if (!isOperator()) return null;
  const what = kind === "sessions" ? `session ${name}` : `t${token}`;
  return [" ", h("button", { type: "button", class: "small revoke", title: `Revoke ${what} (operators)`, onclick: () => revoke(kind, name, token, holder) }, "Revoke")];
}

// ---------- locks, elections, semaphores and sessions ----------

// listLocks reads the locks, semaphores and sessions; the first time
// (start) it then follows the events from the index the list was read at,
// so that nothing between the list and the stream is missed.
async function listLocks(gen, start) {
  clearTimeout(state.locksTimer);
  let index = null;
  const [locks, sems, sessions] = await Promise.allSettled([
    api("/v1/locks", { timeout: 6000 }),
    api("/v1/semaphores", { timeout: 6000 }),
    api("/v1/sessions", { timeout: 6000 }),
  ]);
  if (gen !== state.gen) return;
  const now = performance.now();
  // Sessions first: a grant under one counts down the session's time.
  if (sessions.status === "fulfilled") {
    setSessions(sessions.value.data.sessions || [], now);
    message("#sessions-msg", "");
  } else if (notServed(sessions.reason)) {
    message("#sessions-msg", "This node does not serve sessions: its fencer predates GET /v1/sessions.");
  } else if (!(sessions.reason instanceof APIError && sessions.reason.status === 401)) {
    message("#sessions-msg", refusal(sessions.reason, "the sessions") + (state.sessions.size ? " (showing the last list read, kept current by the events)" : ""));
  }
  if (locks.status === "fulfilled") {
    state.locks = locks.value.data.locks.map((l) => ({ ...l, at: now }));
    index = locks.value.headers.get("Fencer-Index");
    renderLocks();
    message("#locks-msg", "");
  } else if (locks.reason instanceof APIError && locks.reason.status === 401) {
    return authLost(locks.reason);
  } else {
    message("#locks-msg", refusal(locks.reason, "the locks") + (state.locks.length ? " (showing the last list read)" : ""));
  }
  if (sems.status === "fulfilled") {
    state.sems = sems.value.data.semaphores.map((s) => ({ ...s, at: now }));
    renderSems();
    message("#sems-msg", "");
  } else if (!notServed(sems.reason)) {
    message("#sems-msg", refusal(sems.reason, "the semaphores"));
  }
  if (start) {
    if (index == null && locks.status === "rejected") {
      // Retry the list before watching: a watch needs its index.
      state.locksTimer = setTimeout(() => listLocks(gen, true), 2000);
      return;
    }
    startEvents(gen, index);
  }
  state.locksTimer = setTimeout(() => listLocks(gen, false), LOCKS_EVERY);
}

let relistSoon = 0;
function scheduleList() {
  if (relistSoon) return;
  const gen = state.gen;
  relistSoon = setTimeout(() => {
    relistSoon = 0;
    listLocks(gen, false);
  }, 60);
}

function lockRowMatches(name) {
  const f = state.filter;
  return !f || name.toLowerCase().includes(f);
}

// grantUntil is when a grant's time runs out: its own lease's, or, for a
// grant under a session (never timed on its own), the session's.
function grantUntil(remaining, at, session) {
  if (remaining != null) return at + remaining;
  const s = session ? state.sessions.get(session) : null;
  return s && s.remaining_ms != null ? s.at + s.remaining_ms : null;
}

// grantRows are the held grants, a row each: a lock's exclusive grant, or
// each of its shared grants (shared_holders), marked shared. A multi-lock
// (several names held with one token) is one grant, so one row naming
// every lock (names), counted as its names' waiters together.
function grantRows() {
  const out = [];
  const byToken = new Map();
  for (const l of state.locks) {
    if (l.held) {
      const multi = byToken.get(l.token);
      if (multi) {
        multi.names.push(l.lock);
        multi.waiters = (multi.waiters || 0) + (l.waiters || 0);
        continue;
      }
      const row = { ...l, names: [l.lock] };
      byToken.set(l.token, row);
      out.push(row);
    }
    for (const g of l.shared_holders || []) out.push({ ...g, lock: l.lock, waiters: l.waiters, at: l.at, held: true, shared: true });
  }
  for (const r of out) r.multi = !!r.names && r.names.length > 1;
  return out;
}

function renderLocks() {
  const locks = grantRows()
    .filter((l) => (l.names || [l.lock]).some(lockRowMatches))
    .map((l) => ({ ...l, until: grantUntil(l.remaining_ms, l.at, l.session) }));
  locks.sort((a, b) => a.lock.localeCompare(b.lock) || a.token - b.token);
  const key = (l) => JSON.stringify([l.lock, l.token, l.holder, l.value || "", l.lock_delay_ms || 0, l.session || 0, !!l.shared, l.until == null, l.names || []]);
  reconcile($("#locks tbody"), locks, key, lockRow, (row, l) => {
    text(row.querySelector(".waiters"), l.waiters || 0);
    setUntil(row.querySelector(".ttl"), l.until);
  });
  const held = state.locks.filter((l) => l.held || (l.shared_holders || []).length > 0).length;
  $("#locks-empty").hidden = locks.length > 0;
  text("#locks-empty", held && !locks.length ? "No held lock matches the filter." : "No lock is held.");
  text("#locks-count", `${held} held`);
  tick();
}

function lockRow(l) {
  const fresh = !state.seen.has(`${l.lock}:${l.token}`);
  state.seen.add(`${l.lock}:${l.token}`);
  return h(
    "tr",
    { dataset: { lock: l.lock, token: l.token, mode: l.shared ? "shared" : "exclusive", names: (l.names || [l.lock]).join(",") }, class: fresh ? "fresh" : null },
    h(
      "td",
      { class: "wrap" },
      (l.names || [l.lock]).flatMap((n, i) => [
        i ? ", " : null,
        h("button", { type: "button", class: "link lock-name", title: `Show the history of ${n}`, onclick: () => showHistory(n) }, n),
      ]),
      l.multi ? [" ", h("span", { class: "badge multi", title: "A multi-lock: these locks were granted together, in one entry, with one token, and end together" }, "multi-lock")] : null,
      l.value ? [" ", h("span", { class: "badge", title: "This lock publishes a value: an election" }, "election")] : null,
      l.shared ? [" ", h("span", { class: "badge shared", title: "A shared grant: one of the lock's readers, which cannot write under it" }, "shared")] : null,
    ),
    // A multi-lock's names end together: revoking one name alone is refused.
    h("td", { class: "wrap" }, h("span", { class: "holder" }, l.holder), l.session ? [" ", sessionLink(l.session)] : null, l.multi ? null : revokeButton("locks", l.lock, l.token, l.holder)),
    h("td", { class: "num" }, h("button", { type: "button", class: "link token", title: `Whose token is ${l.token}?`, onclick: () => lookupToken(l.token) }, l.token)),
    h("td", { class: "wrap value" }, l.value || "–"),
    h("td", {}, ttlCell(l.until, l.ttl_ms)),
    h("td", { class: "num waiters" }, l.waiters || 0),
    // A lock-delay starts when the grant expires; a release starts none.
    h("td", {}, l.lock_delay_ms ? `${duration(l.lock_delay_ms)} if it expires` : "–"),
  );
}

// setUntil moves a countdown's deadline after a new read.
function setUntil(el, until) {
  if (el && until != null) el.dataset.until = until;
}

function ttlCell(until, ttl) {
  if (until == null) return h("span", { class: "note", title: "a stale read: only the leader times leases" }, "unknown");
  return h("span", { class: "ttl", dataset: { until, ttl: ttl || 0 } }, h("span", { class: "ttl-text" }, ""), h("span", { class: "bar", "aria-hidden": "true" }, h("span", {})));
}

function renderSems() {
  const rows = state.sems
    .filter((s) => s.holders.length > 0 || s.waiters > 0)
    .sort((a, b) => a.semaphore.localeCompare(b.semaphore))
    .map((s) =>
      h(
        "tr",
        { dataset: { semaphore: s.semaphore } },
        h("td", { class: "wrap" }, h("strong", {}, s.semaphore)),
        h("td", { class: "num" }, `${s.holders.length} / ${s.limit}`),
        h(
          "td",
          {},
          h(
            "div",
            { class: "permits" },
            s.holders.map((p) => {
              const until = grantUntil(p.remaining_ms, s.at, p.session);
              return h(
                "span",
                { class: "permit", dataset: { token: p.token } },
                h("span", { class: "holder" }, p.holder),
                " · ",
                h("button", { type: "button", class: "link token", onclick: () => lookupToken(p.token) }, `t${p.token}`),
                p.session ? [" · ", sessionLink(p.session)] : null,
                " · ",
                until != null ? h("span", { class: "ttl", dataset: { until, ttl: 0 } }, h("span", { class: "ttl-text" }, "")) : "?",
                revokeButton("semaphores", s.semaphore, p.token, p.holder),
              );
            }),
          ),
        ),
        h("td", { class: "num" }, s.waiters),
      ),
    );
  $("#semaphores tbody").replaceChildren(...rows);
  $("#sems-empty").hidden = rows.length > 0;
  text("#sems-count", `${rows.length} in use`);
  tick();
}

// setSessions takes a list read: it replaces what the view held, but for
// the sessions and grants an event has since said ended.
function setSessions(list, now) {
  state.sessions = new Map();
  for (const s of list) {
    if (state.endedSessions.has(s.session)) continue;
    const grants = (s.grants || []).filter((g) => !state.endedTokens.has(g.token));
    state.sessions.set(s.session, { ...s, grants, at: now });
  }
  renderSessions();
}

// remember adds v to a bounded set of ended ids, forgetting the oldest.
function remember(set, v) {
  set.add(v);
  if (set.size > 4096) set.delete(set.values().next().value);
}

// applySessionEvent keeps the sessions view current from one event, before
// any list read: a session that ends leaves with its grants, a grant made
// or ended under one joins or leaves its list. What an event does not say
// (a new session's TTL) comes with the read the event also schedules.
function applySessionEvent(ev) {
  let changed = false;
  switch (ev.type) {
    case "session_created":
      if (ev.session && !state.sessions.has(ev.session) && !state.endedSessions.has(ev.session)) {
        state.sessions.set(ev.session, { session: ev.session, holder: ev.holder, grants: [], at: performance.now() });
        changed = true;
      }
      break;
    case "session_closed":
    case "session_expired":
      remember(state.endedSessions, ev.session);
      changed = state.sessions.delete(ev.session);
      break;
    case "revoked":
      // A session's own revoke names no lock or semaphore; a grant's does.
      if (!ev.lock && !ev.semaphore) {
        remember(state.endedSessions, ev.session);
        changed = state.sessions.delete(ev.session);
      } else changed = endGrant(ev.token, ev.session);
      break;
    case "acquired":
    case "handed_off":
    case "permit_acquired":
    case "permit_handed_off":
      // A hand-off's session is the new grant's; the grant it ended may
      // have been under another.
      if (ev.prev_token) changed = endGrant(ev.prev_token, 0);
      if (ev.session) changed = addGrant(ev.session, { kind: ev.semaphore ? "semaphore" : "lock", name: ev.semaphore || ev.lock, token: ev.token }) || changed;
      break;
    case "released":
    case "expired":
    case "voided":
    case "permit_released":
    case "permit_expired":
      changed = endGrant(ev.token, ev.session);
      break;
  }
  if (changed) renderSessions();
}

function addGrant(id, g) {
  const s = state.sessions.get(id);
  if (!s || state.endedTokens.has(g.token) || s.grants.some((x) => x.token === g.token)) return false;
  s.grants = [...s.grants, g].sort((a, b) => a.token - b.token);
  return true;
}

// endGrant drops the grant with this token from its session (id, or any
// when the event does not say).
function endGrant(token, id) {
  if (!token) return false;
  remember(state.endedTokens, token);
  let changed = false;
  for (const s of id ? [state.sessions.get(id)] : state.sessions.values()) {
    if (!s || !s.grants.some((g) => g.token === token)) continue;
    s.grants = s.grants.filter((g) => g.token !== token);
    changed = true;
  }
  return changed;
}

function renderSessions() {
  const sessions = [...state.sessions.values()].sort((a, b) => a.session - b.session);
  const until = (s) => (s.remaining_ms != null ? s.at + s.remaining_ms : null);
  // A row is rebuilt when its grants or its TTL change; a renewal (no
  // event) moves its countdown only.
  const key = (s) => JSON.stringify([s.session, s.holder, s.ttl_ms ?? null, s.lock_delay_ms || 0, until(s) == null, s.grants.map((g) => [g.kind, g.name, g.token])]);
  reconcile($("#sessions tbody"), sessions, key, (s) => sessionRow(s, until(s)), (row, s) => setUntil(row.querySelector(".ttl"), until(s)));
  $("#sessions-empty").hidden = sessions.length > 0;
  const grants = sessions.reduce((n, s) => n + s.grants.length, 0);
  text("#sessions-count", `${sessions.length} open · ${grants} grant${grants === 1 ? "" : "s"}`);
  tick();
}

function sessionRow(s, until) {
  const fresh = !state.seen.has(`session:${s.session}`);
  state.seen.add(`session:${s.session}`);
  return h(
    "tr",
    { dataset: { session: s.session }, class: fresh ? "fresh" : null },
    h("td", { class: "num" }, h("strong", { class: "session-id" }, s.session)),
    h("td", { class: "wrap" }, h("span", { class: "holder" }, s.holder), revokeButton("sessions", s.session, 0, s.holder)),
    h(
      "td",
      { class: "ttl-ms" },
      s.ttl_ms != null ? duration(s.ttl_ms) : "–",
      s.lock_delay_ms ? h("span", { class: "sub", title: "the lock-delay of its grants that did not ask for one, if it expires" }, `lock-delay ${duration(s.lock_delay_ms)}`) : null,
    ),
    h("td", {}, s.ttl_ms == null ? h("span", { class: "note" }, "reading…") : ttlCell(until, s.ttl_ms)),
    h(
      "td",
      { class: "grants" },
      s.grants.length
        ? h(
            "div",
            { class: "permits" },
            s.grants.map((g) =>
              h(
                "span",
                { class: "permit grant", dataset: { kind: g.kind, token: g.token } },
                h("span", { class: "badge kind" }, g.kind === "semaphore" ? "permit" : g.kind),
                " ",
                g.kind === "lock"
                  ? h("button", { type: "button", class: "link grant-name", title: `Show the history of ${g.name}`, onclick: () => showHistory(g.name) }, g.name)
                  : h("strong", { class: "grant-name", title: `a permit of the semaphore ${g.name}` }, g.name),
                " · ",
                h("button", { type: "button", class: "link token", title: `Whose token is ${g.token}?`, onclick: () => lookupToken(g.token) }, `t${g.token}`),
              ),
            ),
          )
        : h("span", { class: "note" }, "none held"),
    ),
  );
}

// sessionLink names the session a grant lives under; a click shows its row.
function sessionLink(id) {
  return h("button", { type: "button", class: "link session-link", title: `Show session ${id}, which this grant lives as long as`, onclick: () => showSession(id) }, `session ${id}`);
}

function showSession(id) {
  const row = document.querySelector(`#sessions tr[data-session="${CSS.escape(String(id))}"]`);
  if (!row) return;
  row.scrollIntoView({ block: "nearest", behavior: "smooth" });
  row.classList.remove("fresh");
  void row.offsetWidth; // restart the highlight
  row.classList.add("fresh");
}

// tick counts every lease's time left down between reads.
function tick() {
  const now = performance.now();
  for (const el of document.querySelectorAll(".ttl[data-until]")) {
    const left = Math.max(0, Number(el.dataset.until) - now);
    const ttl = Number(el.dataset.ttl);
    text(el.querySelector(".ttl-text"), left > 0 ? duration(left) : "expiring…");
    if (left < 1000) el.dataset.low = "";
    else delete el.dataset.low;
    const bar = el.querySelector(".bar > span");
    if (bar && ttl > 0) bar.style.width = `${Math.min(100, (100 * left) / ttl).toFixed(1)}%`;
  }
}

// ---------- events ----------

function startEvents(gen, index) {
  if (state.stream) state.stream.stop();
  state.stream = new EventStream({
    onEvent: (ev) => {
      if (gen === state.gen) onEvent(ev);
    },
    onState: (s, detail) => {
      if (gen !== state.gen) return;
      const el = $("#events-state");
      el.dataset.state = s;
      text(el, s === "live" ? "live" : s === "connecting" ? "connecting" : "disconnected");
      el.title = detail || "";
    },
    onCompacted: () => {
      // The node no longer has the events after our index: list again and
      // follow from the new list's index.
      if (gen === state.gen) listLocks(gen, true);
    },
    onAuth: (err) => {
      if (gen !== state.gen) return;
      if (err.status === 401) authLost(err);
      else addFeed(h("li", {}, h("span", { class: "idx" }, ""), h("span", { class: "what error" }, refusal(err, "the events"))));
    },
  });
  state.stream.start(index);
}

const LOCK_EVENTS = new Set(["acquired", "released", "expired", "handed_off", "voided", "value_set", "epoch", "revoked"]);

function onEvent(ev) {
  addFeed(feedItem(ev));
  applySessionEvent(ev);
  if (LOCK_EVENTS.has(ev.type) || ev.lock || ev.semaphore || ev.session) scheduleList();
  scheduleCluster(); // the indexes and the last token moved
}

let clusterSoon = 0;
function scheduleCluster() {
  if (clusterSoon) return;
  const gen = state.gen;
  clusterSoon = setTimeout(() => {
    clusterSoon = 0;
    pollCluster(gen);
  }, 150);
}

function addFeed(li) {
  const feed = $("#feed");
  feed.prepend(li);
  while (feed.children.length > FEED_MAX) feed.lastElementChild.remove();
  $("#feed-empty").hidden = true;
}

function lockLink(name) {
  return h("button", { type: "button", class: "link", onclick: () => showHistory(name) }, name);
}

function tokenLink(t) {
  return h("button", { type: "button", class: "link", onclick: () => lookupToken(t) }, `t${t}`);
}

function feedItem(ev) {
  let what;
  const sessionOwn = ev.type.startsWith("session_") || (ev.type === "revoked" && !ev.lock && !ev.semaphore);
  const under = ev.session && !sessionOwn ? ` (session ${ev.session})` : "";
  switch (ev.type) {
    case "acquired":
      what = [lockLink(ev.lock), ` → ${ev.holder} `, tokenLink(ev.token), ev.mode === "shared" ? " shared" : "", ev.value ? ` value "${ev.value}"` : ""];
      break;
    case "released":
      what = [lockLink(ev.lock), ` released by ${ev.holder} `, tokenLink(ev.token)];
      break;
    case "expired":
      what = [lockLink(ev.lock), `: ${ev.holder}'s lease ran out `, tokenLink(ev.token)];
      break;
    case "handed_off":
      what = [lockLink(ev.lock), `: ${ev.prev_holder} `, tokenLink(ev.prev_token), ` ${ev.reason || "ended"} → ${ev.holder} `, tokenLink(ev.token)];
      break;
    case "voided":
      what = [lockLink(ev.lock), `: ${ev.holder}'s grant `, tokenLink(ev.token), " voided by a restore"];
      break;
    case "value_set":
      what = [lockLink(ev.lock), ` value → "${ev.value || ""}" by `, tokenLink(ev.token)];
      break;
    case "put":
      what = [`key ${ev.key} written with `, tokenLink(ev.token), ev.value_size != null ? ` (${ev.value_size} bytes)` : ""];
      break;
    case "key_deleted":
      what = [`key ${ev.key} deleted`];
      break;
    case "member_added":
      what = [`member ${ev.member} added`];
      break;
    case "member_removed":
      what = [`member ${ev.member} removed`];
      break;
    case "epoch":
      what = [`token epoch moved to ${ev.epoch}`];
      break;
    case "permit_acquired":
      what = [`semaphore ${ev.semaphore} → ${ev.holder} `, tokenLink(ev.token), ev.limit ? ` (${ev.held ?? "?"} of ${ev.limit})` : ""];
      break;
    case "permit_released":
    case "permit_expired":
      what = [`semaphore ${ev.semaphore}: ${ev.holder}'s permit `, tokenLink(ev.token), ev.type === "permit_released" ? " released" : " ran out"];
      break;
    case "permit_handed_off":
      what = [`semaphore ${ev.semaphore}: ${ev.prev_holder} `, tokenLink(ev.prev_token), ` ${ev.reason || "ended"} → ${ev.holder} `, tokenLink(ev.token)];
      break;
    case "session_created":
      what = [`session ${ev.session} opened by ${ev.holder}`];
      break;
    case "session_closed":
      what = [`session ${ev.session} of ${ev.holder} closed: every grant under it released`];
      break;
    case "session_expired":
      what = [`session ${ev.session} of ${ev.holder} ran out: every grant under it ended`];
      break;
    case "revoked":
      if (ev.lock) what = [lockLink(ev.lock), `: ${ev.holder}'s grant `, tokenLink(ev.token), " revoked by an operator"];
      else if (ev.semaphore) what = [`semaphore ${ev.semaphore}: ${ev.holder}'s permit `, tokenLink(ev.token), " revoked by an operator"];
      else what = [`session ${ev.session} of ${ev.holder} revoked by an operator: every grant under it ended`];
      break;
    case "queued":
      what = [ev.lock ? lockLink(ev.lock) : `semaphore ${ev.semaphore}`, `: ${ev.holder} queued durably at ${ev.wait_index}`];
      break;
    case "dequeued":
      what = [ev.lock ? lockLink(ev.lock) : `semaphore ${ev.semaphore}`, `: ${ev.holder}'s durable wait (queued at ${ev.wait_index}) ran out`];
      break;
    default:
      what = [JSON.stringify(ev)];
  }
  return h(
    "li",
    { dataset: { type: ev.type, index: ev.index } },
    h("span", { class: "idx", title: "log index" }, ev.index ?? ""),
    h("span", { class: "what" }, h("span", { class: `badge type ${ev.type}` }, ev.type.replaceAll("_", " ")), ...what, under),
  );
}

// ---------- history and token lookup ----------

async function showHistory(name) {
  $("#history-lock").value = name;
  const out = $("#history-answer");
  out.replaceChildren(h("p", { class: "note" }, `Reading the history of ${name}…`));
  $("#history").scrollIntoView({ block: "nearest", behavior: "smooth" });
  try {
    const { data } = await api(`/v1/locks/${enc(name)}/history?limit=20`);
    const grants = data.grants || [];
    if (!grants.length) {
      out.replaceChildren(h("p", { class: "note" }, `No grant of ${name} is kept.`));
      return;
    }
    out.replaceChildren(
      h("p", { class: "note" }, `The last ${grants.length} grant${grants.length === 1 ? "" : "s"} of `, h("strong", {}, data.lock || name), ", newest first:"),
      h(
        "div",
        { class: "table-wrap" },
        h(
          "table",
          { id: "history-table" },
          h("thead", {}, h("tr", {}, h("th", { scope: "col", class: "num" }, "Token"), h("th", { scope: "col" }, "Holder"), h("th", { scope: "col" }, "Ended (log index)"))),
          h(
            "tbody",
            {},
            grants.map((g) => ({ ...g, ended: ended(g) })).map((g) =>
              h(
                "tr",
                { dataset: { token: g.token } },
                h("td", { class: "num", title: `granted at log index ${g.granted_index}` }, tokenLink(g.token)),
                h("td", { class: "wrap" }, g.holder),
                h(
                  "td",
                  {},
                  g.ended
                    ? [h("span", { class: `badge ${g.ended === "released" || g.ended === "handed_off" ? "" : "warn"}` }, g.ended.replace("_", " ")), ` ${g.ended_index || ""}`]
                    : h("span", { class: "badge ok" }, "held"),
                ),
              ),
            ),
          ),
        ),
      ),
    );
  } catch (err) {
    out.replaceChildren(h("p", { class: "section-msg", role: "alert" }, historyError(err, name)));
  }
}

// ended is how a grant ended, "" while it is held ("held" on the wire).
function ended(g) {
  return g.ended && g.ended !== "held" ? g.ended : "";
}

function historyError(err, name) {
  if (notServed(err)) return "This node does not keep lock histories: its fencer predates GET /v1/locks/{name}/history.";
  if (err instanceof APIError && err.status === 401) {
    authLost(err);
    return err.message;
  }
  return refusal(err, `the history of ${name}`);
}

async function lookupToken(t) {
  const input = $("#token-lookup");
  input.value = String(t);
  const out = $("#token-answer");
  if (!/^[0-9]+$/.test(String(t).trim())) {
    out.replaceChildren(h("p", { class: "error", role: "alert" }, "A fencing token is a whole number, like 1234."));
    return;
  }
  out.replaceChildren(h("p", { class: "note" }, `Looking up token ${t}…`));
  try {
    const { data } = await api(`/v1/tokens/${enc(String(t).trim())}`);
    const g = { ...data, ended: ended(data) };
    out.replaceChildren(
      h(
        "dl",
        { id: "token-result" },
        h("dt", {}, "Token"),
        h("dd", {}, String(g.token)),
        // A semaphore permit's grant names its semaphore (its lock is "").
        g.semaphore ? [h("dt", {}, "Semaphore"), h("dd", {}, g.semaphore)] : [h("dt", {}, "Lock"), h("dd", {}, lockLink(g.lock))],
        h("dt", {}, "Holder"),
        h("dd", {}, g.holder),
        h("dt", {}, "Granted at"),
        h("dd", {}, `log index ${g.granted_index}`),
        h("dt", {}, "Ended"),
        h("dd", {}, g.ended ? `${g.ended.replace("_", " ")} at log index ${g.ended_index}` : "not yet: still held"),
      ),
    );
  } catch (err) {
    let msg;
    if (notServed(err)) msg = "This node does not answer token lookups: its fencer predates GET /v1/tokens/{token}.";
    else if (err instanceof APIError && err.code === "unknown_token") msg = `No grant with token ${t} is known: ${err.message}`;
    else if (err instanceof APIError && err.status === 401) {
      authLost(err);
      return;
    } else msg = refusal(err, `token ${t}`);
    out.replaceChildren(h("p", { class: "section-msg", role: "alert" }, msg));
  }
}

// ---------- wiring ----------

function wire() {
  $("#login-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const t = $("#token-input").value.trim();
    if (!t) return;
    setToken(t);
    $("#token-input").value = "";
    $("#login-error").textContent = "";
    state.gen++;
    signIn();
  });
  $("#sign-out").addEventListener("click", () => signOut(""));
  $("#token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    lookupToken($("#token-lookup").value.trim());
  });
  $("#history-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const name = $("#history-lock").value.trim();
    if (name) showHistory(name);
  });
  $("#lock-filter").addEventListener("input", (e) => {
    state.filter = e.target.value.trim().toLowerCase();
    renderLocks();
  });
  setInterval(tick, 200);
}

wire();
signIn();
