// Token view: one ES module for both hosts (anywidget in Jupyter, Panel's AnyWidget component).
// The Python side sends patches: {keep, segments, header} plus three binary buffers for the
// tokens of the new segments (ids uint32, ends uint32 in UTF-16 units as our strings count,
// special uint8). We keep what we were sent. A new segment that takes the place of one we hold
// (an edited message) may come as the change alone: `from` (the one it replaces), `head` and
// `tail` (its tokens kept at each end), `chars` (the characters those spell), and the text and
// tokens between; its spans in between are replaced, the others stay as they are.
// Hosts differ in two places. anywidget passes the buffers as the callback's second argument
// (DataViews) and has model.send. Panel's AnyWidget adapter passes one argument, so its host puts
// the buffers in the message (msg.buffers: bytes, which arrive as ArrayBuffers), and it has no
// model.send, so a new view asks for the whole state by bumping the synced `sync` counter.
// In `workbench app` the patches come over the page's keystroke channel instead (a websocket of its
// own, one binary frame per patch: see openChannel), once it is open. Patches from the app carry
// their `version` and the `base` they apply to (null: a whole view); one that does not apply to what
// we hold (it came the other way, or late) is not applied: the view asks for the whole state.
// The view follows the edit: after a patch that changes part of the prompt (a keystroke, a delete),
// the first message segment it changed is scrolled into the view's own box when it is not in sight
// (the page itself does not scroll, so the box being typed in stays where it is).

const CHANNEL_WAIT_MS = 3000; // a channel not ready by then: the first view comes through the model
const LAZY_TOKENS = 2000; // a patch with more tokens (a whole view) draws a segment's tokens when it scrolls near
const FOLD_TOKENS = 4000; // long segments render folded; a click unfolds them (keeps big prompts responsive)

function asView(b) {
  // A DataView or typed array (anywidget), or an ArrayBuffer (Panel, via Bokeh's binary frames).
  if (b instanceof ArrayBuffer) return new DataView(b);
  return b && b.buffer instanceof ArrayBuffer ? b : new DataView(new ArrayBuffer(0));
}

function decodeRuns(seg, ids, ends, special, offset, n = seg.end - seg.start) {
  // Split the segment text into token pieces using each token's end offset.
  if (n > 0 && ends[offset + n - 1] === 0 && seg.from === undefined) return null; // no boundaries known: text whole
  const pieces = [];
  let prev = 0;
  for (let i = 0; i < n; i++) {
    const end = ends[offset + i]; // a token inside a character ends where the previous one did
    const piece = { id: ids[offset + i], text: seg.text.slice(prev, end), special: special[offset + i] === 1 };
    const label = seg.labels && seg.labels[i]; // part of a character: its bytes, <0xF0><0x9F>
    if (label !== undefined) piece.label = label;
    pieces.push(piece);
    prev = end;
  }
  return pieces;
}

function unpack(buf) {
  // A binary patch frame (channel.py, encode_patch): u32 length, the JSON part, then its arrays.
  const n = new DataView(buf).getUint32(0, true);
  const msg = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 4, n)));
  let at = 4 + n;
  const buffers = msg.sizes.map((size) => { const v = new DataView(buf, at, size); at += size; return v; });
  return { msg, buffers };
}

function openChannel(info, on) {
  // The view's end of the page's keystroke channel (workbench/ui/channel.py): a hello with the
  // page's token; then "ready", binary patches, or an error frame.
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${info.path}`);
  ws.binaryType = "arraybuffer";
  ws.onopen = () => ws.send(JSON.stringify({ type: "hello", token: info.token, role: "view" }));
  ws.onmessage = (e) => {
    if (typeof e.data !== "string") { const { msg, buffers } = unpack(e.data); on.patch(msg, buffers); return; }
    const m = JSON.parse(e.data);
    if (m.type === "ready") on.ready();
    else if (m.type === "error") on.error(`${m.code}: ${m.message}`);
  };
  ws.onclose = on.close;
  return ws;
}

// A segment the model will not see (`struck`): "dropped" by the truncation policy, or "over" the window.
// A dropped one is in no prompt that is sent (`sent: false`): its start and end count its tokens, they
// are no place in the prompt, so its label shows none. The summary slot's message (`summary`) is sent,
// though no request holds it: the summary-slot policy put it in place of the dropped ones.
const STRUCK = { dropped: "dropped by truncation · not sent", over: "over the window: would not fit" };
const SUMMARY = "inserted by the summary-slot truncation policy in place of the dropped messages";

function offsets(seg) {
  return seg.sent === false ? "" : ` [${seg.start}:${seg.end}]`;
}

function segNotes(seg) {
  return (seg.sent === false ? "" : ` · ${seg.source}`) + (seg.summary ? ` · ${SUMMARY}` : "") +
    (seg.struck ? ` · ${STRUCK[seg.struck] || seg.struck}` : "");
}

function imageText(img, n) {
  // "image 640×400 · 322 tokens": an image segment's one line (its tokens are folded under it).
  const size = img.width && img.height ? ` ${img.width}×${img.height}` : "";
  return `image${size} · ${n} tokens` + (img.rule && img.rule.includes("estimate") ? " (estimate)" : "") +
    (img.size_assumed ? " (size assumed: not fetched)" : "");
}

function imageTitle(img) {
  return [img.where ? `from ${img.where}` : "", img.digest ? `digest ${img.digest.slice(0, 16)}…` : "",
    img.detail ? `detail ${img.detail}` : "", img.rule ? `counted by ${img.rule}` : ""].filter(Boolean).join(" · ");
}

function segLabel(seg) {
  if (seg.kind === "folded") return "folded: what the truncation policy drops";
  if (seg.kind === "image" && seg.image) {
    return `${imageText(seg.image, seg.end - seg.start)}${seg.role ? " · " + seg.role : ""}` +
      `${seg.seq !== null ? " · seq " + seg.seq : ""}` + (seg.sent === false ? "" : ` ·${offsets(seg)}`) + segNotes(seg);
  }
  return `${seg.kind}${seg.role ? " · " + seg.role : ""}${seg.seq !== null ? " · seq " + seg.seq : ""}` +
    ` · ${seg.end - seg.start} tokens${offsets(seg)}${segNotes(seg)}`;
}

function tokenSpan(t, seg, showTokens) {
  const span = document.createElement("span");
  span.className = t.special ? "wb-special" : (showTokens ? "wb-tok" : "");
  span.textContent = t.label !== undefined ? t.label : t.text;
  if (t.label !== undefined) span.className += " wb-bytes";
  span.title = `token ${t.id} · ${seg.kind}${seg.seq !== null ? " seq " + seg.seq : ""}` +
    (t.label !== undefined ? " · bytes of a character split across tokens" : "");
  return span;
}

function segClass(seg) {
  return `wb-seg wb-kind-${seg.kind}` + (seg.kind === "message" && seg.role ? ` wb-role-${seg.role}` : "") +
    ` wb-src-${seg.source}` + (seg.struck ? ` wb-overflow wb-struck-${seg.struck}` : "") +
    (seg.summary ? " wb-summary" : "");
}

function tokenNodes(tokens, seg, showTokens) {
  // One span per token; a run of byte tokens (`label`, <0xE2><0x98>) that together spell a character
  // goes in a <ruby> with the character above it (<rt>), each token's bytes still shown. The run ends
  // at the token that completes the character: the one with text (those before it have none).
  const out = [];
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    let j = i;
    while (j < tokens.length && tokens[j].label !== undefined && !tokens[j].text) j++;
    if (t.label === undefined || j === tokens.length || tokens[j].label === undefined) {
      out.push(tokenSpan(t, seg, showTokens));
      continue;
    }
    const ruby = document.createElement("ruby");
    ruby.className = "wb-char";
    for (let k = i; k <= j; k++) ruby.appendChild(tokenSpan(tokens[k], seg, showTokens));
    const rt = document.createElement("rt");
    const spelt = tokens[j].text.trim() || tokens[j].text;   // (" ☕": the space is the first token's)
    rt.textContent = spelt;
    ruby.title = `${spelt}: ${j - i + 1} tokens, its bytes split between them`;
    ruby.appendChild(rt);
    out.push(ruby);
    i = j;
  }
  return out;
}

function spliced(old, seg, mid) {
  // The segment an in-place change makes of `old`: its text and tokens, head and tail kept.
  const t = old.seg.text;
  const text = t.slice(0, seg.chars[0]) + seg.text + t.slice(t.length - seg.chars[1]);
  const tokens = [...old.tokens.slice(0, seg.head), ...mid, ...old.tokens.slice(old.tokens.length - seg.tail)];
  const { from, head, tail, chars, labels, ...meta } = seg; // labels: on the tokens now
  return { seg: { ...meta, text }, tokens };
}

function renderSegment(seg, tokens, showTokens, warnings, later) {
  // later(div, draw): draw the tokens once the segment is near the visible part (its text until then).
  const div = document.createElement("div");
  div.className = segClass(seg);
  const label = document.createElement("div");
  label.className = "wb-seg-label";
  label.textContent = segLabel(seg);
  div.appendChild(label);
  for (const w of warnings || []) {
    // Injection and other warnings about this message, inline where the text is.
    const note = document.createElement("div");
    note.className = `wb-seg-warn wb-diag-${w.level}`;
    note.textContent = `⚠ ${w.code}: ${w.message}`;
    div.appendChild(note);
  }
  const body = document.createElement("div");
  if (seg.kind === "image" && seg.image) {
    // An image is one block: its size and token count, where it came from on hover; its tokens
    // (hundreds of placeholders) folded until the block is clicked.
    const img = seg.image;
    const chip = document.createElement("div");
    chip.className = "wb-image-block";
    chip.textContent = imageText(img, seg.end - seg.start) + (img.where ? ` · ${img.where}` : "");
    chip.title = imageTitle(img) + " · click to show its tokens";
    const toks = document.createElement("div");
    toks.className = "wb-image-tokens";
    toks.hidden = true;
    chip.onclick = () => {
      toks.hidden = !toks.hidden;
      if (!toks.hidden && !toks.childNodes.length) {
        if (tokens) toks.append(...tokenNodes(tokens, seg, showTokens));
        else toks.textContent = seg.text;
      }
    };
    body.className = "wb-image-body";
    body.append(chip, toks);
    div.appendChild(body);
    return div;
  }
  const draw = (all) => {
    body.textContent = "";
    if (!tokens || (!tokens.length && seg.text)) { body.textContent = seg.text; return; }   // a folded run: its line
    const shown = all ? tokens : tokens.slice(0, FOLD_TOKENS);
    const nodes = tokenNodes(shown, seg, showTokens);
    body.append(...nodes);
    // Every token has its span, one child of the body each: a change can be spliced in.
    div.wbSpans = shown.length === tokens.length && nodes.length === shown.length;
    if (!all && tokens.length > FOLD_TOKENS) {
      const more = document.createElement("span");
      more.className = "wb-folded";
      more.textContent = ` … ${tokens.length - FOLD_TOKENS} more tokens (click to show)`;
      more.onclick = () => draw(true);
      body.appendChild(more);
    }
  };
  if (later && tokens) { body.textContent = seg.text; later(div, () => draw(false)); } else draw(false);
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
  // The header travels in each patch (the Panel host syncs nothing else per keystroke); anywidget
  // also syncs it as a trait, which a view drawn before any patch shows.
  let header = model.get("header") || {};
  let version = 0; // the version of the patches applied (the app's patches are numbered)
  let channelError = "";
  // Token spans are many DOM nodes: a whole view (a template switch, 28k tokens) draws them only for
  // the segments near the visible part, and the others' as they scroll near (the text shows meanwhile).
  const near = typeof IntersectionObserver === "function" ? new IntersectionObserver((entries) => {
    let drew = false;
    for (const e of entries) if (e.isIntersecting) { near.unobserve(e.target); e.target.wbDraw(); drew = true; }
    if (drew) requestAnimationFrame(() => performance.mark("wb-drawn-painted"));   // for the benchmark
  }, { root, rootMargin: "100% 0px" }) : null;
  const later = (div, draw) => { div.wbDraw = draw; near.observe(div); };
  const laterIf = (n) => near && n > LAZY_TOKENS ? later : null;
  const warningsFor = (seq) => seq === null ? [] :
    ((header || {}).diagnostics || []).filter((d) => d.seq === seq && d.level !== "info");

  const drawHeader = () => {
    const h = header || {};
    const err = model.get("error");
    const b = h.budget || {};
    head.innerHTML = "";
    const line = document.createElement("div");
    line.textContent = h.template ? `${h.template} · ${h.tokenizer} · ${h.total_tokens} tokens · ${h.segments} segments` +
      ` (${h.reused_segments} reused) · budget ${b.used}/${b.input_budget} · key ${h.cache_key}` : "no prompt yet";
    head.appendChild(line);
    // What the model will not see (the struck-through segments below): the app sends the line, the
    // notebook the whole header's {note, over, dropped, dropped_tokens}.
    const overflow = typeof h.overflow === "string" ? h.overflow : (h.overflow && h.overflow.note);
    if (overflow) {
      const note = document.createElement("div");
      note.className = "wb-overflow-note";
      note.textContent = overflow;
      head.appendChild(note);
    }
    const toggle = document.createElement("label");
    toggle.className = "wb-toggle";
    const box = document.createElement("input");
    box.type = "checkbox";
    box.checked = showTokens;
    box.onchange = () => {
      showTokens = box.checked;
      const lazy = laterIf(segs.reduce((n, s) => n + s.seg.end - s.seg.start, 0));
      for (const s of segs) {
        const node = renderSegment(s.seg, s.tokens, showTokens, warningsFor(s.seg.seq), lazy);
        if (near) near.unobserve(s.node);
        s.node.replaceWith(node);
        s.node = node;
      }
    };
    toggle.append(box, " token boundaries");
    head.appendChild(toggle);
    for (const text of [err, channelError && `channel: ${channelError}`]) {
      if (text) { const e = document.createElement("div"); e.className = "wb-error"; e.textContent = text; head.appendChild(e); }
    }
  };

  // Ask for the whole state: over the channel when it is open, else as the host allows.
  let ws = null, viaChannel = false, asked = false, resyncing = false;
  const askAll = () => {
    asked = true;
    if (viaChannel) ws.send(JSON.stringify({ type: "sync" }));
    else if (typeof model.send === "function") model.send({ type: "sync" });
    else { model.set("sync", (model.get("sync") || 0) + 1); model.save_changes(); }
  };

  const follow = (node, again = 2) => {
    // Scroll the box (not the page) so `node` is in sight below the sticky header. Off-screen
    // segments have an estimated height until drawn, so the position is checked again once the
    // segments near it have been laid out.
    if (!node.isConnected || !root.clientHeight) return;
    const box = root.getBoundingClientRect(), r = node.getBoundingClientRect();
    const top = box.top + head.offsetHeight;
    if (r.top < top || r.bottom > box.bottom) {
      const room = box.bottom - top;
      // A segment taller than the box shows its end (where typing usually is); else it is centred.
      const delta = r.height > room ? r.bottom - box.bottom + 8 : r.top - top - (room - r.height) / 2;
      root.scrollTop += delta;
    }
    if (again > 0) requestAnimationFrame(() => follow(node, again - 1));
  };

  const apply = (msg, buffers) => {
    if (!msg || msg.type !== "patch") return;
    performance.mark("wb-received");
    // A change to a segment we do not hold (with its tokens) cannot apply: ask for the whole view.
    const stale = msg.segments.some((s) => s.from !== undefined && !(segs[s.from] && segs[s.from].tokens));
    if (msg.version !== undefined && msg.version !== null && msg.version <= version) return; // came the other way, late
    if (stale || (msg.base !== null && msg.base !== undefined && msg.base !== version)) {
      if (!resyncing) { resyncing = true; askAll(); } // once, until a whole view comes
      return;
    }
    if (msg.version !== undefined && msg.version !== null) version = msg.version;
    if (msg.header) { header = msg.header; drawHeader(); }
    if (msg.header_changes) { header = { ...header, ...msg.header_changes }; drawHeader(); }
    const got = buffers && buffers.length ? buffers : msg.buffers || [];
    const [b0, b1, b2] = [0, 1, 2].map((i) => asView(got[i]));
    const ids = new Uint32Array(b0.buffer, b0.byteOffset, b0.byteLength / 4);
    const ends = new Uint32Array(b1.buffer, b1.byteOffset, b1.byteLength / 4);
    const special = new Uint8Array(b2.buffer, b2.byteOffset, b2.byteLength);
    let offset = 0;
    const lazy = laterIf(ids.length);
    const diagnostics = !!msg.header_changes && "diagnostics" in msg.header_changes;
    const fresh = msg.segments.map((seg) => {
      if (seg.from !== undefined) {
        // The change alone, in place of a segment we hold: splice its spans where they are drawn.
        const n = seg.end - seg.start - seg.head - seg.tail;
        const mid = decodeRuns(seg, ids, ends, special, offset, n);
        offset += n;
        const old = segs[seg.from];
        const made = spliced(old, seg, mid);
        const body = old.node.lastChild;
        // (A change with bytes of a character is drawn whole: they group under the character.)
        if (old.node.wbSpans && !diagnostics && made.tokens.length <= FOLD_TOKENS && body.childNodes.length === old.tokens.length &&
            !mid.some((t) => t.label !== undefined)) {
          for (let i = old.tokens.length - seg.tail - 1; i >= seg.head; i--) body.childNodes[i].remove();
          const at = body.childNodes[seg.head] || null;
          for (const t of mid) body.insertBefore(tokenSpan(t, made.seg, showTokens), at);
          old.node.className = segClass(made.seg);
          old.node.querySelector(".wb-seg-label").textContent = segLabel(made.seg);
          return { ...made, node: old.node };
        }
        return { ...made, node: renderSegment(made.seg, made.tokens, showTokens, warningsFor(seg.seq), lazy) };
      }
      const tokens = decodeRuns(seg, ids, ends, special, offset);
      offset += seg.end - seg.start;
      return { seg, tokens, node: renderSegment(seg, tokens, showTokens, warningsFor(seg.seq), lazy) };
    });
    // runs: which segments we hold stay (moved by `shift` tokens), in order, between the new ones;
    // without runs, the first `keep` stay and the new ones follow.
    const runs = msg.runs || [{ old: 0, count: msg.keep, shift: 0 }, { new: fresh.length }];
    const next = [];
    let k = 0;
    for (const run of runs) {
      if (run.new !== undefined) { next.push(...fresh.slice(k, k + run.new)); k += run.new; continue; }
      for (const s of segs.slice(run.old, run.old + run.count)) {
        if (run.shift) {
          s.seg = { ...s.seg, start: s.seg.start + run.shift, end: s.seg.end + run.shift };
          s.node.querySelector(".wb-seg-label").textContent = segLabel(s.seg);
        }
        next.push(s);
      }
    }
    const staying = new Set(next.map((s) => s.node));
    for (const s of segs) if (!staying.has(s.node)) { if (near) near.unobserve(s.node); s.node.remove(); }
    // Put the nodes in order, touching only those not already where they belong.
    let before = null;
    for (let i = next.length - 1; i >= 0; i--) {
      const node = next[i].node;
      if (node.nextSibling !== before || node.parentNode !== list) list.insertBefore(node, before);
      before = node;
    }
    segs = next;
    const whole = msg.keep === 0 && !msg.runs && !msg.segments.some((s) => s.from !== undefined);
    const edited = whole ? null : fresh.find((s) => s.seg.seq !== null && s.seg.seq !== undefined);
    if (edited) follow(edited.node);
    if (msg.base === null || msg.base === undefined) resyncing = false;
    const v = msg.version ?? model.get("version");
    performance.mark(`wb-patched-${v}`);
    // The next frame: the patch is painted (what a keystroke-to-repaint benchmark measures).
    requestAnimationFrame(() => performance.mark(`wb-painted-${v}`));
  };
  model.on("msg:custom", apply);
  model.on("change:header", () => { header = model.get("header") || {}; drawHeader(); });
  model.on("change:error", drawHeader);
  drawHeader();
  // A new view asks for the whole state: over the channel once it is ready (or the model, if it is
  // not ready within CHANNEL_WAIT_MS or closes).
  const info = model.get("channel") || {};
  if (info.token && info.path && typeof WebSocket === "function" && typeof model.send !== "function") {
    ws = openChannel(info, {
      patch: apply,
      ready: () => { viaChannel = true; askAll(); },
      error: (text) => { channelError = text; drawHeader(); },
      close: () => { const was = viaChannel; viaChannel = false; if (was || !asked) askAll(); },
    });
    root.wbChannel = ws; // for tests and debugging
    setTimeout(() => { if (!asked) askAll(); }, CHANNEL_WAIT_MS);
  } else askAll();
  return () => { segs = []; if (ws) ws.close(); if (near) near.disconnect(); };
}

export default { render };
