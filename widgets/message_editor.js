// Message editor: one ES module for both hosts (anywidget in Jupyter, Panel's AnyWidget component).
// Synced from Python: `messages` (the list being edited), `turn_cut` (how many of them the selected
// turn's request holds; later ones are shown dimmed), `format`, `error` ({index, field, message}).
// Every edit goes to Python as an operation ({op: "set"|"insert"|"delete"|"move", ...}); Python
// applies it to the session document and re-assembles. Text edits are applied here too, so Python
// never echoes the list back per keystroke; structural edits come back as a new `messages`.
// Operations travel by model.send where the host has it (anywidget); in `workbench app`, over the
// page's keystroke channel (a websocket of its own, see openChannel) once it is open; else through
// the synced `ops` list (Panel's adapter): see sendOp.
// `counts` (synced from Python, after the summary) is each message's tokens in the prompt shown; a
// row shows its own, updated in place. Undo: {op: "undo"} and {op: "redo"} go the same way; Ctrl+Z
// (Ctrl+Shift+Z, Ctrl+Y) in the editor outside a text box sends them (inside one, the box's own
// undo runs), and a delete shows a "deleted message 3 · Undo" notice.
// `parts` (synced from Python, workbench/ui/content_parts.py): per message, null, or the parts of a
// content list that holds images, audio or files: each text part gets its own box (its edits go as
// {op: "set", field: "content", part: k, value}), each other part a read-only chip (kind, size,
// bytes). Editing the text never drops those parts.
// `items` (synced from Python, workbench/ui/responses_items.py): per row, null (a message), or the
// shape of a Responses API row (the instructions, an input item): {kind, label, role, roles?,
// fields, notes?}. Each field is a box ({field, label, part?, key?, input?, json?, rows?}: its value
// is row[field], or row[field][part][key || "text"]) or a read-only chip ({chip, kind, title}); an
// edit goes as {op: "set", index, field, part?, value, json?}. What a function_call is, Python says.
// An error whose index names a row opens that row (an item the intake refuses after an edit elsewhere).

const ROLES = ["system", "user", "assistant", "tool", "developer"];
const PREVIEW = 90;

const queues = new WeakMap(); // model -> {n, ops}: the operations the Panel host may not have read yet
const channels = new WeakMap(); // model -> the open keystroke channel (openChannel)
const STRUCTURAL = new Set(["insert", "delete", "move", "undo", "redo"]);
const SPLICED = new Set(["content", "tool_call_id", "name"]); // text fields a splice may carry

function splice(old, now) {
  // The change from `old` to `now` as {at, remove, text}, never cutting a surrogate pair in two.
  let p = 0;
  const n = Math.min(old.length, now.length);
  while (p < n && old.charCodeAt(p) === now.charCodeAt(p)) p++;
  if (p > 0 && (old.charCodeAt(p - 1) & 0xfc00) === 0xd800) p--;
  let s = 0;
  while (s < n - p && old.charCodeAt(old.length - 1 - s) === now.charCodeAt(now.length - 1 - s)) s++;
  if (s > 0 && (old.charCodeAt(old.length - s) & 0xfc00) === 0xdc00) s--;
  return { at: p, remove: old.length - p - s, text: now.slice(p, now.length - s) };
}

function openChannel(model, info, onError) {
  // The editor's end of the page's keystroke channel (workbench/ui/channel.py). Once the server says
  // ready, operations go here; a text edit goes as a splice from the value last sent here (the first
  // edit of a field after the channel opened goes whole). An error frame is shown inline; an
  // out-of-sync one is answered with the field's whole value. Closed: back to the model.
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${info.path}`);
  const ch = { ws, sent: new Map() };
  ch.send = (op, n) => {
    const key = `${op.index}/${op.field}`;
    let out = op;
    if (op.op === "set" && !op.json && op.part === undefined && SPLICED.has(op.field) && typeof op.value === "string") {
      if (ch.sent.has(key)) {
        const old = ch.sent.get(key);
        out = { op: "splice", index: op.index, field: op.field, ...splice(old, op.value), length: old.length };
      }
      ch.sent.set(key, op.value);
    } else if (STRUCTURAL.has(op.op)) ch.sent.clear(); // indices move: the next edits go whole
    ws.send(JSON.stringify({ type: "op", op: { ...out, n } }));
  };
  ws.onopen = () => ws.send(JSON.stringify({ type: "hello", token: info.token, role: "editor" }));
  ws.onmessage = (e) => {
    const m = typeof e.data === "string" ? JSON.parse(e.data) : {};
    if (m.type === "ready") channels.set(model, ch);
    else if (m.type === "error" && m.code === "out-of-sync" && Number.isInteger(m.index)) {
      ch.sent.delete(`${m.index}/${m.field}`);
      const msg = (model.get("messages") || [])[m.index] || {};
      if (typeof msg[m.field] === "string") sendOp(model, { op: "set", index: m.index, field: m.field, value: msg[m.field] });
    } else if (m.type === "error") onError(`${m.code}: ${m.message}`);
  };
  ws.onclose = (e) => {
    if (channels.get(model) === ch) channels.delete(model);
    if (e.code !== 1000 && e.code !== 1001) onError(`closed (${e.code} ${e.reason}); edits go on through the page's model`);
  };
  return ws;
}

function sendOp(model, op) {
  if (typeof model.send === "function") { model.send({ type: "op", ...op }); return; }
  // Panel's adapter syncs a property, and its server applies only the latest value of a property
  // that changed twice before it looked: so the property is a list of the recent operations,
  // numbered; Python applies those it has not seen. A later "set" of the same field replaces an
  // earlier one since the last structural operation (it carries the whole value).
  let q = queues.get(model);
  if (!q) { q = { n: 0, ops: [] }; queues.set(model, q); }
  q.n += 1;
  const ch = channels.get(model);
  if (ch) { ch.send(op, q.n); return; }
  if (op.op === "set") {
    let cut = -1;
    q.ops.forEach((o, k) => { if (STRUCTURAL.has(o.op)) cut = k; });
    q.ops = q.ops.filter((o, k) => k <= cut || !(o.op === "set" && o.index === op.index && o.field === op.field &&
      o.part === op.part));
  }
  // Always a new array: Bokeh sends a property only when its value is a different object.
  q.ops = [...q.ops, { ...op, n: q.n }].slice(-32);
  model.set("ops", q.ops);
  model.save_changes();
}

function contentText(m) {
  // Plain text for a string content; JSON for a list of blocks (edited as JSON, checked in Python).
  if (typeof m.content === "string") return { text: m.content, json: false };
  if (m.content === null || m.content === undefined) return { text: "", json: false };
  return { text: JSON.stringify(m.content, null, 1), json: true };
}

function fieldValue(m, f) {
  // A box's value in row `m` (its shape's field): text, or JSON for a json box.
  const v = f.part !== undefined ? ((m[f.field] || [])[f.part] || {})[f.key || "text"] : m[f.field];
  if (f.json) return v === undefined || v === null ? "" : (typeof v === "string" ? v : JSON.stringify(v, null, 1));
  return typeof v === "string" ? v : "";
}

function preview(m, parts, shape) {
  // A message with media parts: its text, and a short mark per part ("[image 640×400 · PNG · 2,431 bytes]").
  // A Responses row: its boxes' values and chips, in order.
  const c = (shape ? (shape.fields || []).map((f) => f.chip !== undefined ? `[${f.chip}]` : fieldValue(m, f)).join(" ") :
    parts ? parts.map((p) => p.label !== undefined ? `[${p.label}]` :
      ((m.content || [])[p.k] || {}).text || "").join(" ") : contentText(m).text).replace(/\s+/g, " ").trim();
  const calls = Array.isArray(m.tool_calls) ? ` [${m.tool_calls.length} tool call(s)]` : "";
  return (c.length > PREVIEW ? c.slice(0, PREVIEW) + "…" : c) + calls;
}

function button(text, title, onclick) {
  const b = document.createElement("button");
  b.className = "wb-me-btn";
  b.textContent = text;
  b.title = title;
  b.onclick = (e) => { e.stopPropagation(); onclick(); };
  return b;
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "wb-message-editor";
  const list = document.createElement("div");
  list.className = "wb-me-list";
  const foot = document.createElement("div");
  foot.className = "wb-me-foot";
  const channelError = document.createElement("div"); // a frame the keystroke channel refused
  channelError.className = "wb-me-error wb-me-channel-error";
  channelError.hidden = true;
  const notice = document.createElement("div"); // "deleted message 3 · Undo"
  notice.className = "wb-me-notice";
  notice.hidden = true;
  root.tabIndex = -1; // focusable: Ctrl+Z reaches it after a click on a row
  root.append(channelError, notice, list, foot);
  el.appendChild(root);
  const info = model.get("channel") || {};
  if (info.token && info.path && typeof WebSocket === "function" && typeof model.send !== "function") {
    // The socket hangs on the element too, for tests and debugging.
    root.wbChannel = openChannel(model, info, (text) => { channelError.textContent = `channel: ${text}`; channelError.hidden = false; });
  }
  const open = new Set(); // indices whose editors are shown; the last message starts open
  const drafts = new Map(); // "index/field/part" -> JSON text typed since the list came (not applied yet while invalid)
  // Any other step makes the notice's Undo mean something else: it goes away.
  const send = (op) => { notice.hidden = true; sendOp(model, op); };
  const undo = (redo = false) => send({ op: redo ? "redo" : "undo" });
  const say = (text) => {
    notice.textContent = `${text} · `;
    const link = document.createElement("button");
    link.className = "wb-me-undo";
    link.textContent = "Undo";
    link.onclick = (e) => { e.stopPropagation(); undo(); };
    notice.appendChild(link);
    notice.hidden = false;
  };
  root.addEventListener("keydown", (e) => {
    if (!(e.ctrlKey || e.metaKey) || e.altKey) return;
    const key = e.key.toLowerCase();
    if (key !== "z" && key !== "y") return;
    const t = e.target;
    // A text box keeps its own undo (the browser's, for what was typed in it).
    if (t && (t.tagName === "TEXTAREA" || (t.tagName === "INPUT" && t.type !== "checkbox") || t.isContentEditable)) return;
    e.preventDefault();
    e.stopPropagation(); // not the notebook's own Ctrl+Z (its cells)
    undo(key === "y" || e.shiftKey);
  });
  const countText = (c) => (c === null || c === undefined ? "" : `${c} tok`);
  const showCounts = () => {
    const counts = model.get("counts") || [];
    for (const span of list.querySelectorAll(".wb-me-count")) {
      const text = countText(counts[Number(span.dataset.index)]);
      if (span.textContent !== text) span.textContent = text;
    }
  };
  let lastCount = -1;

  const addBar = () => {
    foot.textContent = "";
    const sel = document.createElement("select");
    for (const r of ROLES) { const o = document.createElement("option"); o.value = r; o.textContent = r; sel.appendChild(o); }
    sel.value = "user";
    sel.className = "wb-me-add-role";
    foot.append("Add a ", sel, " message ");
    foot.appendChild(button("+ add", "append a message at the end", () => {
      const n = (model.get("messages") || []).length;
      open.add(n);
      send({ op: "insert", index: n, role: sel.value });
    }));
  };

  const field = (m, i, name, label, value, { json = false, rows = 3, input = false, part = undefined, key = "text" } = {}) => {
    const wrap = document.createElement("label");
    wrap.className = `wb-me-field wb-me-${name}`;
    wrap.append(label);
    const box = document.createElement(input ? "input" : "textarea");
    if (!input) box.rows = rows;
    const draft = `${i}/${name}/${part}`;
    box.value = json && drafts.has(draft) ? drafts.get(draft) : value;
    box.spellcheck = false;
    box.dataset.index = String(i);
    box.dataset.field = name;
    if (part !== undefined) box.dataset.part = String(part);
    box.addEventListener("input", () => {
      // Keep our copy current (no echo from Python), then send the edit at once: Python coalesces.
      const msgs = model.get("messages");
      if (part !== undefined) {
        // One text part of a list: the other parts (images, files) stay as they are.
        const list = [...(msgs[i][name] || [])];
        list[part] = { ...(list[part] || {}), [key]: box.value };
        msgs[i] = { ...msgs[i], [name]: list };
      } else if (!json) msgs[i] = { ...msgs[i], [name]: box.value };
      else drafts.set(draft, box.value); // a redraw (its error arriving) keeps what was typed
      if (!json) headLine(i); // the row's summary follows what is typed (a new message's was empty)
      performance.mark(`wb-input-${i}`);
      channelError.hidden = true;
      send(part !== undefined ? { op: "set", index: i, field: name, part, value: box.value }
        : { op: "set", index: i, field: name, value: box.value, json });
    });
    wrap.appendChild(box);
    return wrap;
  };

  const chip = (p) => {
    const c = document.createElement("span");
    c.className = `wb-me-chip wb-me-chip-${p.kind}`;
    c.textContent = p.label;
    c.title = p.title || "";
    return c;
  };

  const headText = (m, i, cut) => {
    const parts = ((model.get("parts") || [])[i] || {}).parts;
    const shape = (model.get("items") || [])[i] || null;
    return `${i}` + (i >= cut ? " (after this turn)" : "") + " · " + preview(m, parts, shape);
  };
  const headLine = (i) => {
    const span = list.querySelector(`.wb-me-row[data-index="${i}"] .wb-me-preview`);
    const msgs = model.get("messages") || [];
    if (span && msgs[i]) span.textContent = headText(msgs[i], i, model.get("turn_cut") ?? msgs.length);
  };

  const row = (m, i, cut, err) => {
    const parts = ((model.get("parts") || [])[i] || {}).parts;
    const shape = (model.get("items") || [])[i] || null; // a Responses row: its kind and fields, from Python
    const div = document.createElement("div");
    div.className = `wb-me-row wb-me-role-${shape ? shape.role : m.role}` + (shape ? ` wb-me-kind-${shape.kind}` : "") +
      (i >= cut ? " wb-me-later" : "") + (open.has(i) ? " wb-me-open" : "");
    div.dataset.index = String(i);
    const head = document.createElement("div");
    head.className = "wb-me-head";
    const roles = shape ? shape.roles : ROLES;
    let role;
    if (roles) {
      role = document.createElement("select");
      role.className = "wb-me-role";
      for (const r of roles) { const o = document.createElement("option"); o.value = r; o.textContent = r; role.appendChild(o); }
      role.value = roles.includes(m.role) ? m.role : "user";
      role.onclick = (e) => e.stopPropagation();
      role.onchange = () => send({ op: "set", index: i, field: "role", value: role.value });
    } else {
      role = document.createElement("span"); // an item with no role to pick: its kind
      role.className = "wb-me-kind";
      role.textContent = shape.label;
    }
    const text = document.createElement("span");
    text.className = "wb-me-preview";
    text.textContent = headText(m, i, cut);
    const count = document.createElement("span");
    count.className = "wb-me-count";
    count.dataset.index = String(i);
    count.title = "tokens of this message in the prompt shown";
    count.textContent = countText((model.get("counts") || [])[i]);
    head.append(role, text, count,
      button("↑", "move up", () => i > 0 && send({ op: "move", index: i, to: i - 1 })),
      button("↓", "move down", () => i + 1 < (model.get("messages") || []).length &&
        send({ op: "move", index: i, to: i + 1 })),
      button("+", "insert a user message below", () => { open.add(i + 1); send({ op: "insert", index: i + 1, role: "user" }); }),
      button("✕", "delete this message", () => { send({ op: "delete", index: i }); say(`deleted message ${i}`); }));
    head.onclick = () => { open.has(i) ? open.delete(i) : open.add(i); draw(); };
    div.appendChild(head);
    if (open.has(i)) {
      const body = document.createElement("div");
      body.className = "wb-me-body";
      if (shape) {
        // A Responses row: its fields in order, as Python describes them; the rest of the item is kept.
        for (const f of [...(shape.fields || []), ...(shape.notes || [])]) {
          if (f.chip !== undefined) { body.appendChild(chip({ kind: f.kind, label: f.chip, title: f.title })); continue; }
          const v = fieldValue(m, f);
          body.appendChild(field(m, i, f.field, f.label, v, { json: !!f.json, input: !!f.input, part: f.part,
            key: f.key || "text", rows: f.rows || Math.min(12, Math.max(2, v.split("\n").length + 1)) }));
        }
      } else if (parts) {
        // Text parts in boxes, the other parts as chips, in the message's order.
        for (const p of parts) {
          if (p.label !== undefined) { body.appendChild(chip(p)); continue; }
          const t = ((m.content || [])[p.k] || {}).text || "";
          body.appendChild(field(m, i, "content", `text (part ${p.k})`, t,
            { part: p.k, rows: Math.min(12, Math.max(2, t.split("\n").length + 1)) }));
        }
      } else {
        const c = contentText(m);
        body.appendChild(field(m, i, "content", c.json ? "content (JSON blocks)" : "content", c.text,
          { json: c.json, rows: Math.min(12, Math.max(3, c.text.split("\n").length + 1)) }));
      }
      if (!shape && m.role === "assistant" && model.get("format") !== "anthropic") {
        const calls = Array.isArray(m.tool_calls) ? JSON.stringify(m.tool_calls, null, 1) : "";
        body.appendChild(field(m, i, "tool_calls", "tool calls (JSON list)", calls, { json: true, rows: calls ? 6 : 2 }));
      }
      if (!shape && m.role === "tool") body.appendChild(field(m, i, "tool_call_id", "tool_call_id", m.tool_call_id || "", { input: true }));
      if (err && err.index === i) {
        const e = document.createElement("div");
        e.className = "wb-me-error";
        e.textContent = err.message;
        body.appendChild(e);
      }
      div.appendChild(body);
    }
    return div;
  };

  const draw = () => {
    const msgs = model.get("messages") || [];
    const cut = model.get("turn_cut") ?? msgs.length;
    const err = model.get("error") || {};
    if (msgs.length !== lastCount) { if (lastCount < 0 && msgs.length) open.add(msgs.length - 1); lastCount = msgs.length; }
    if (Number.isInteger(err.index) && err.index < msgs.length) open.add(err.index); // the row the error names
    // Keep the focused box and its caret across a redraw (an error arriving while typing).
    const active = document.activeElement;
    const focus = active && list.contains(active) && active.dataset.field ?
      { index: active.dataset.index, field: active.dataset.field, part: active.dataset.part,
        start: active.selectionStart, end: active.selectionEnd } : null;
    list.textContent = "";
    msgs.forEach((m, i) => list.appendChild(row(m || {}, i, cut, err)));
    if (err.message && (err.index === null || err.index === undefined)) {
      const e = document.createElement("div");
      e.className = "wb-me-error";
      e.textContent = err.message;
      list.appendChild(e);
    }
    if (focus) {
      const box = list.querySelector(`[data-index="${focus.index}"][data-field="${focus.field}"]` +
        (focus.part !== undefined ? `[data-part="${focus.part}"]` : ""));
      if (box) { box.focus(); box.setSelectionRange(focus.start, focus.end); }
    }
  };

  model.on("change:messages", () => {
    const ch = channels.get(model);
    if (ch) ch.sent.clear(); // the list came from the server (a revert, another turn): next edits go whole
    drafts.clear();
    draw();
  });
  model.on("change:session", () => {
    // Another session opened: nothing of the previous one's stays (its "deleted message 220 · Undo",
    // its open rows), and its last message starts open as on a new page.
    notice.hidden = true;
    channelError.hidden = true;
    open.clear();
    lastCount = -1;
    draw();
  });
  model.on("change:items", draw);
  model.on("change:turn_cut", draw);
  model.on("change:error", draw);
  model.on("change:counts", showCounts);
  model.on("change:parts", draw);
  addBar();
  draw();
  if (typeof model.send === "function") model.send({ type: "sync" });
  return () => {};
}

export default { render };
