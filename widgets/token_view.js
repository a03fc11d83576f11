// Token view: one ES module for both hosts (anywidget in Jupyter, Panel's AnyWidget component).
// The Python side sends patches: {keep, segments, header} plus three binary buffers for the
// tokens of the new segments (ids uint32, ends uint32, special uint8). We keep what we were sent.
// Hosts differ in two places. anywidget passes the buffers as the callback's second argument
// (DataViews) and has model.send. Panel's AnyWidget adapter passes one argument, so its host puts
// the buffers in the message (msg.buffers: bytes, which arrive as ArrayBuffers), and it has no
// model.send, so a new view asks for the whole state by bumping the synced `sync` counter.

const FOLD_TOKENS = 4000; // long segments render folded; a click unfolds them (keeps big prompts responsive)

function asView(b) {
  // A DataView or typed array (anywidget), or an ArrayBuffer (Panel, via Bokeh's binary frames).
  if (b instanceof ArrayBuffer) return new DataView(b);
  return b && b.buffer instanceof ArrayBuffer ? b : new DataView(new ArrayBuffer(0));
}

function decodeRuns(seg, ids, ends, special, offset) {
  // Split the segment text into token pieces using each token's end offset.
  const n = seg.end - seg.start;
  if (n > 0 && ends[offset + n - 1] === 0) return null; // no boundaries known: show the text whole
  const pieces = [];
  let prev = 0;
  for (let i = 0; i < n; i++) {
    const end = ends[offset + i]; // a token inside a character ends where the previous one did
    pieces.push({ id: ids[offset + i], text: seg.text.slice(prev, end), special: special[offset + i] === 1 });
    prev = end;
  }
  return pieces;
}

function renderSegment(seg, tokens, showTokens, warnings) {
  const div = document.createElement("div");
  div.className = `wb-seg wb-kind-${seg.kind}` + (seg.kind === "message" && seg.role ? ` wb-role-${seg.role}` : "") +
    ` wb-src-${seg.source}`;
  const label = document.createElement("div");
  label.className = "wb-seg-label";
  label.textContent = `${seg.kind}${seg.role ? " · " + seg.role : ""}${seg.seq !== null ? " · seq " + seg.seq : ""}` +
    ` · ${seg.end - seg.start} tokens [${seg.start}:${seg.end}] · ${seg.source}`;
  div.appendChild(label);
  for (const w of warnings || []) {
    // Injection and other warnings about this message, inline where the text is.
    const note = document.createElement("div");
    note.className = `wb-seg-warn wb-diag-${w.level}`;
    note.textContent = `⚠ ${w.code}: ${w.message}`;
    div.appendChild(note);
  }
  const body = document.createElement("div");
  const draw = (all) => {
    body.textContent = "";
    if (!tokens) { body.textContent = seg.text; return; }
    const shown = all ? tokens : tokens.slice(0, FOLD_TOKENS);
    for (const t of shown) {
      const span = document.createElement("span");
      span.className = t.special ? "wb-special" : (showTokens ? "wb-tok" : "");
      span.textContent = t.text;
      span.title = `token ${t.id} · ${seg.kind}${seg.seq !== null ? " seq " + seg.seq : ""}`;
      body.appendChild(span);
    }
    if (!all && tokens.length > FOLD_TOKENS) {
      const more = document.createElement("span");
      more.className = "wb-folded";
      more.textContent = ` … ${tokens.length - FOLD_TOKENS} more tokens (click to show)`;
      more.onclick = () => draw(true);
      body.appendChild(more);
    }
  };
  draw(false);
  div.appendChild(body);
  return div;
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "wb-token-view";
  const head = document.createElement("div");
  head.className = "wb-header";
  const list = document.createElement("div");
  root.append(head, list);
  el.appendChild(root);
  let segs = []; // [{seg, tokens, node}]
  let showTokens = true; // token boundaries: alternate shading per token
  const warningsFor = (seq) => seq === null ? [] :
    ((model.get("header") || {}).diagnostics || []).filter((d) => d.seq === seq && d.level !== "info");

  const drawHeader = () => {
    const h = model.get("header") || {};
    const err = model.get("error");
    const b = h.budget || {};
    head.innerHTML = "";
    const line = document.createElement("div");
    line.textContent = h.template ? `${h.template} · ${h.tokenizer} · ${h.total_tokens} tokens · ${h.segments} segments` +
      ` (${h.reused_segments} reused) · budget ${b.used}/${b.input_budget} · key ${h.cache_key}` : "no prompt yet";
    head.appendChild(line);
    const toggle = document.createElement("label");
    toggle.className = "wb-toggle";
    const box = document.createElement("input");
    box.type = "checkbox";
    box.checked = showTokens;
    box.onchange = () => {
      showTokens = box.checked;
      for (const s of segs) { const node = renderSegment(s.seg, s.tokens, showTokens, warningsFor(s.seg.seq)); s.node.replaceWith(node); s.node = node; }
    };
    toggle.append(box, " token boundaries");
    head.appendChild(toggle);
    if (err) { const e = document.createElement("div"); e.className = "wb-error"; e.textContent = err; head.appendChild(e); }
  };

  model.on("msg:custom", (msg, buffers) => {
    if (!msg || msg.type !== "patch") return;
    const got = buffers && buffers.length ? buffers : msg.buffers || [];
    const [b0, b1, b2] = [0, 1, 2].map((i) => asView(got[i]));
    const ids = new Uint32Array(b0.buffer, b0.byteOffset, b0.byteLength / 4);
    const ends = new Uint32Array(b1.buffer, b1.byteOffset, b1.byteLength / 4);
    const special = new Uint8Array(b2.buffer, b2.byteOffset, b2.byteLength);
    for (const old of segs.slice(msg.keep)) old.node.remove();
    segs = segs.slice(0, msg.keep);
    let offset = 0;
    for (const seg of msg.segments) {
      const tokens = decodeRuns(seg, ids, ends, special, offset);
      offset += seg.end - seg.start;
      const node = renderSegment(seg, tokens, showTokens, warningsFor(seg.seq));
      list.appendChild(node);
      segs.push({ seg, tokens, node });
    }
    const v = model.get("version");
    performance.mark(`wb-patched-${v}`);
    // The next frame: the patch is painted (what a keystroke-to-repaint benchmark measures).
    requestAnimationFrame(() => performance.mark(`wb-painted-${v}`));
  });
  model.on("change:header", drawHeader);
  model.on("change:error", drawHeader);
  drawHeader();
  // A new view asks for the whole state.
  if (typeof model.send === "function") model.send({ type: "sync" });
  else { model.set("sync", (model.get("sync") || 0) + 1); model.save_changes(); }
  return () => { segs = []; };
}

export default { render };
