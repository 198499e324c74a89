// dom.js: small helpers to build the page without innerHTML (so no name,
// holder or value sent by a client can become markup).

export function $(sel) {
  return document.querySelector(sel);
}

// h builds an element: h("td", {class: "num"}, "42", child, …). Attributes
// starting with "on" are listeners; "dataset" is an object of data-*.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function text(sel, value) {
  const el = typeof sel === "string" ? $(sel) : sel;
  const s = value == null || value === "" ? "–" : String(value);
  if (el.textContent !== s) el.textContent = s;
}

// show sets a section's message (or hides it when msg is empty).
export function message(sel, msg) {
  const el = $(sel);
  el.hidden = !msg;
  el.textContent = msg || "";
}

// duration formats milliseconds as a person reads them: 850 ms, 12.4 s, 3 min 20 s.
export function duration(ms) {
  if (ms == null) return "–";
  if (ms < 0) ms = 0;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  const m = Math.floor(ms / 60000);
  const s = Math.floor((ms % 60000) / 1000);
  if (m < 60) return s ? `${m} min ${s} s` : `${m} min`;
  const hr = Math.floor(m / 60);
  return `${hr} h ${m % 60} min`;
}

// reconcile makes tbody's rows those of items, in order, keeping the row of
// an item whose key did not change (so focus and selection survive a
// refresh) and building the others; update(row, item) then refreshes a kept
// row's changing cells.
export function reconcile(tbody, items, key, build, update) {
  const old = new Map();
  for (const row of tbody.children) old.set(row.dataset.key, row);
  const rows = items.map((item) => {
    const k = key(item);
    let row = old.get(k);
    if (row) {
      old.delete(k);
      if (update) update(row, item);
    } else {
      row = build(item);
      row.dataset.key = k;
    }
    return row;
  });
  rows.forEach((row, i) => {
    if (tbody.children[i] !== row) tbody.insertBefore(row, tbody.children[i] || null);
  });
  for (const row of old.values()) row.remove();
}
