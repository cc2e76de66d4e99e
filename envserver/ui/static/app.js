// Shinken web UI: pool view, episode list and replay, task view.
// Plain JavaScript, no build step. Every string from the server goes into
// the page as text, never as markup.
"use strict";

const main = document.getElementById("main");
const statusEl = document.getElementById("status");
let stopView = () => {}; // ends the current view's polling

// ---- helpers ----

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of kids.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

const SVGNS = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...kids) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") e.textContent = v; else e.setAttribute(k, v);
  }
  for (const c of kids.flat()) if (c) e.append(c);
  return e;
}

// getJSON fetches a UI API path. With an etag it sends If-None-Match and
// resolves to null on 304 (nothing changed).
async function getJSON(path, etag) {
  const headers = {};
  if (etag) headers["If-None-Match"] = etag;
  const r = await fetch(path, { headers, cache: "no-store", credentials: "same-origin" });
  if (r.status === 304) return null;
  if (r.status === 401) { location.href = "/ui/"; throw new Error("unauthorized"); }
  const body = await r.json();
  if (!r.ok) throw new Error((body.error && body.error.message) || r.statusText);
  return { body, etag: r.headers.get("ETag") };
}

// poller runs fn now and then every ms while the page is visible, until the
// returned stop function is called.
function poller(fn, ms) {
  let timer = null, stopped = false;
  const tick = async () => {
    timer = null;
    if (stopped) return;
    if (document.visibilityState === "visible") {
      try { await fn(); statusEl.textContent = ""; }
      catch (e) { statusEl.textContent = "⚠ " + e.message; }
    }
    if (!stopped) timer = setTimeout(tick, ms);
  };
  tick();
  return () => { stopped = true; if (timer) clearTimeout(timer); };
}

const badge = (text, cls) => el("span", { class: "badge " + (cls || ""), text });
const fmtReward = (r) => (r === undefined || r === null ? "" : (Math.round(r * 1000) / 1000).toString());
const fmtTime = (t) => (t ? new Date(t).toLocaleString() : "");
const frameURL = (h) => "/ui/frames/" + encodeURIComponent(h);
function rate(v) { return v >= 10 ? v.toFixed(0) : v.toFixed(1); }

// ---- router ----

function route() {
  stopView();
  stopView = () => {};
  main.replaceChildren();
  const hash = location.hash || "#/pool";
  const [path, query] = hash.slice(1).split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean);
  const view = parts[0] || "pool";
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.view === (view === "episode" ? "episodes" : view));
  }
  if (view === "episodes") stopView = episodesView(params);
  else if (view === "episode" && parts[1]) stopView = replayView(decodeURIComponent(parts[1]), params);
  else if (view === "tasks") stopView = tasksView();
  else stopView = poolView(params);
}
window.addEventListener("hashchange", route);

// ---- pool view ----

const GAUGES = [
  ["warm", "warm", (s) => s.warm],
  ["leased", "leased", (s) => s.leased],
  ["resets_ps", "resets/s", (s) => s.resets_ps],
  ["steps_ps", "steps/s", (s) => s.steps_ps],
  ["deaths", "deaths", (s) => s.deaths],
];

function poolView(params) {
  // Thumbnails are server-made JPEGs this wide; thumb=0 shows full frames.
  const thumbW = params.has("thumb") ? parseInt(params.get("thumb"), 10) || 0 : 320;
  const thumbURL = (h) => frameURL(h) + (thumbW ? "?w=" + thumbW : "");
  // Only cards on screen fetch their frames.
  const seenCards = new IntersectionObserver((entries) => {
    for (const en of entries) {
      const c = en.target._card;
      if (!c) continue;
      c.visible = en.isIntersecting;
      if (c.visible) loadThumb(c);
    }
  });
  const gauges = el("div", { class: "gauges", id: "gauges" });
  const gaugeEls = {};
  for (const [key, name] of GAUGES) {
    const line = svg("polyline", { points: "" });
    const val = el("span", { class: "val", text: "–" });
    gaugeEls[key] = { line, val };
    gauges.append(el("div", { class: "gauge", "data-name": key },
      el("span", { class: "name", text: name }), val,
      svg("svg", { viewBox: "0 0 100 40", preserveAspectRatio: "none" }, line)));
  }
  const summary = el("div", { class: "summary", id: "pool-summary" });
  const sandboxes = el("div", { class: "sandboxes", id: "sandboxes" });
  const grid = el("div", { class: "grid", id: "env-grid" });
  main.append(el("section", { id: "pool-view" },
    el("h2", { text: "Pool" }), gauges, summary, sandboxes,
    el("h2", { text: "Envs" }), grid));

  let samples = [], seq = 0, cap = 600;
  function drawGauges() {
    for (const [key, , get] of GAUGES) {
      const g = gaugeEls[key];
      if (!samples.length) continue;
      const vals = samples.map(get);
      const last = vals[vals.length - 1];
      // Rates read as the mean of the last 5 s; one second is too jumpy.
      const recent = vals.slice(-5);
      g.val.textContent = key.endsWith("_ps") ? rate(recent.reduce((a, b) => a + b, 0) / recent.length) : String(last);
      const hi = Math.max(1, ...vals);
      const n = Math.max(vals.length - 1, 1);
      g.line.setAttribute("points", vals.map((v, i) => `${(i * 100 / n).toFixed(2)},${(38 - v * 36 / hi).toFixed(2)}`).join(" "));
    }
  }
  const stopSeries = poller(async () => {
    const r = await getJSON("/ui/api/series?after=" + seq);
    if (!r) return;
    cap = r.body.cap;
    if (r.body.seq < seq) samples = []; // server restarted
    samples = samples.concat(r.body.samples).slice(-cap);
    seq = r.body.seq;
    drawGauges();
  }, 1000);

  const cards = new Map();
  let etag = null;
  const stopPool = poller(async () => {
    const r = await getJSON("/ui/api/pool", etag);
    if (!r) return; // 304: unchanged
    etag = r.etag;
    renderPool(r.body);
  }, 1000);

  function renderPool({ pool, envs }) {
    const st = pool.stats;
    summary.replaceChildren(
      badge(`provider ${pool.provider}`), badge(`snapshots ${pool.snapshot_kind}`),
      badge(`size ${pool.size}`), badge(`warm ${st.warm}`, "s-warm"), badge(`replicas ${st.replicas}`, "s-replica"),
      badge(`leased ${st.leased}`, "s-leased"), badge(`booting ${st.booting}`, "s-booting"),
      badge(`deaths ${st.deaths}`, st.deaths ? "s-dead" : ""), badge(`${envs.length} envs`));
    sandboxes.replaceChildren(...(pool.sandboxes || []).map((s) =>
      el("span", { class: "badge s-" + s.state, title: s.id + (s.golden ? " · replica of " + s.golden : ""), "data-sandbox": s.id },
        s.state + (s.golden ? " " + s.golden : ""))));
    if (st.booting) sandboxes.append(...Array.from({ length: st.booting }, () => badge("booting", "s-booting")));
    const seen = new Set();
    for (const e of envs) {
      seen.add(e.id);
      let c = cards.get(e.id);
      if (!c) {
        c = makeCard(e.id);
        cards.set(e.id, c);
        grid.append(c.root);
      }
      updateCard(c, e);
    }
    for (const [id, c] of cards) if (!seen.has(id)) { seenCards.unobserve(c.root); c.root.remove(); cards.delete(id); }
    if (!envs.length && !grid.querySelector(".muted")) grid.append(el("p", { class: "muted", text: "No open envs." }));
    else if (envs.length) grid.querySelectorAll(":scope > p.muted").forEach((p) => p.remove());
  }

  function makeCard(id) {
    const img = el("img", { class: "thumb", alt: "latest frame of " + id });
    const box = el("div", { class: "thumbbox" }, img);
    const state = el("span", { class: "badge" });
    const task = el("span"), step = el("span"), reward = el("span"), ep = el("a");
    const root = el("div", { class: "env-card", "data-env": id }, box,
      el("div", { class: "meta" },
        el("div", {}, el("span", { class: "id", text: id }), state),
        el("div", {}, task, step),
        el("div", {}, ep, reward)));
    const c = { root, img, box, state, task, step, reward, ep, frame: "", want: "", visible: false };
    root._card = c;
    seenCards.observe(root);
    return c;
  }

  function loadThumb(c) {
    if (!c.visible || !c.want || c.want === c.frame) return;
    const h = c.want;
    c.frame = h;
    // Swap only once the new frame has loaded: no flicker.
    const next = new Image();
    next.onload = () => { if (c.frame === h) { c.img.src = next.src; c.img.dataset.frame = h; } };
    next.src = thumbURL(h);
  }

  function updateCard(c, e) {
    c.state.textContent = e.state + (e.busy ? " ·" : "");
    c.state.className = "badge s-" + e.state;
    c.root.dataset.state = e.state;
    c.task.textContent = e.task || "";
    c.step.textContent = e.episode_id ? `step ${e.step}/${e.max_steps}` : "";
    c.reward.textContent = e.exit_reason ? `${e.exit_reason} · r=${fmtReward(e.reward)}` : (e.step ? `r=${fmtReward(e.reward)}` : "");
    c.ep.textContent = e.episode_id || "";
    c.ep.href = e.episode_id ? "#/episode/" + encodeURIComponent(e.episode_id) : "#/pool";
    if (e.frame) { c.want = e.frame; loadThumb(c); }
  }

  return () => { stopSeries(); stopPool(); seenCards.disconnect(); };
}

// ---- episodes view ----

function episodesView(params) {
  const limit = 50;
  const offset = Math.max(0, parseInt(params.get("offset") || "0", 10) || 0);
  const form = el("form", { class: "filters", id: "episode-filters" });
  const task = el("select", { name: "task" }, el("option", { value: "", text: "any task" }));
  const exit = el("select", { name: "exit" }, el("option", { value: "", text: "any exit" }),
    el("option", { value: "running", text: "running" }), el("option", { value: "none", text: "closed unscored" }));
  const minR = el("input", { name: "min_reward", type: "number", step: "any", size: 5, value: params.get("min_reward") || "" });
  const maxR = el("input", { name: "max_reward", type: "number", step: "any", size: 5, value: params.get("max_reward") || "" });
  const since = el("input", { name: "since", type: "datetime-local", value: params.get("since_local") || "" });
  const until = el("input", { name: "until", type: "datetime-local", value: params.get("until_local") || "" });
  form.append(
    el("label", {}, "task", task), el("label", {}, "exit reason", exit),
    el("label", {}, "reward ≥", minR), el("label", {}, "reward ≤", maxR),
    el("label", {}, "started after", since), el("label", {}, "started before", until),
    el("button", { type: "submit", text: "Filter" }));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    if (task.value) q.set("task", task.value);
    if (exit.value) q.set("exit", exit.value);
    if (minR.value) q.set("min_reward", minR.value);
    if (maxR.value) q.set("max_reward", maxR.value);
    if (since.value) q.set("since_local", since.value);
    if (until.value) q.set("until_local", until.value);
    location.hash = "#/episodes?" + q.toString();
  });
  const tbody = el("tbody");
  const table = el("table", { id: "episodes-table" },
    el("thead", {}, el("tr", {}, ...["started", "episode", "task", "env", "steps", "reward", "exit", "errors"].map((h) => el("th", { text: h })))),
    tbody);
  const pager = el("div", { class: "pager" });
  main.append(el("section", { id: "episodes-view" }, el("h2", { text: "Episodes" }), form, pager, table));

  const api = new URLSearchParams();
  for (const k of ["task", "exit", "min_reward", "max_reward"]) if (params.get(k)) api.set(k, params.get(k));
  if (params.get("since_local")) api.set("since", String(new Date(params.get("since_local")).getTime()));
  if (params.get("until_local")) api.set("until", String(new Date(params.get("until_local")).getTime()));
  api.set("offset", offset);
  api.set("limit", limit);
  let etag = null, filled = false;
  return poller(async () => {
    const r = await getJSON("/ui/api/episodes?" + api.toString(), etag);
    if (!r) return;
    etag = r.etag;
    const page = r.body;
    if (!filled) {
      filled = true;
      for (const t of page.tasks) task.append(el("option", { value: t, text: t }));
      for (const x of page.exits) exit.append(el("option", { value: x, text: x }));
      task.value = params.get("task") || "";
      exit.value = params.get("exit") || "";
    }
    tbody.replaceChildren(...page.items.map((s) => {
      const link = "#/episode/" + encodeURIComponent(s.id);
      const ex = s.ended_at ? (s.exit_reason || "closed") : "running";
      return el("tr", { "data-episode": s.id },
        el("td", { text: fmtTime(s.started_at) }),
        el("td", {}, el("a", { href: link, text: s.id })),
        el("td", { text: s.task }), el("td", { class: "muted", text: s.env_id }),
        el("td", { text: s.steps }), el("td", { text: fmtReward(s.reward) }),
        el("td", {}, badge(ex, "x-" + ex)), el("td", { text: s.errors || "" }));
    }));
    if (!page.items.length) tbody.append(el("tr", {}, el("td", { colspan: 8, class: "muted", text: "No episodes match." })));
    const go = (off) => { const q = new URLSearchParams(params); q.set("offset", off); location.hash = "#/episodes?" + q; };
    pager.replaceChildren(
      el("button", { type: "button", text: "← newer", disabled: offset === 0, onclick: () => go(Math.max(0, offset - limit)) }),
      el("span", { id: "page-label", text: page.total ? `${offset + 1}–${offset + page.items.length} of ${page.total}` : "0 episodes" }),
      el("button", { type: "button", text: "older →", disabled: offset + limit >= page.total, onclick: () => go(offset + limit) }));
  }, 3000);
}

// ---- replay view ----

const KNOWN_STEP = new Set(["index", "actions", "text", "dialect", "prompt_ids", "response_ids", "response_mask",
  "response_logprobs", "finish_reason", "obs_frame", "reward", "error", "t_ms", "info", "a11y"]);
const KNOWN_TRAJ = new Set(["episode_id", "env_id", "task", "seed", "fork_of", "steps", "reward", "exit_reason",
  "num_turns", "started_at", "ended_at", "init_frame", "labels", "envelope", "audit"]);

function replayView(id, params) {
  const img = el("img", { id: "replay-img", alt: "frame" });
  const overlay = svg("svg", { id: "replay-overlay", preserveAspectRatio: "none" });
  const nof = el("div", { class: "nof", text: "frame not recorded" });
  const stage = el("div", { class: "stage", id: "replay-frame" }, img, overlay);
  const scrub = el("input", { id: "scrubber", type: "range", min: 0, max: 0, value: 0 });
  const posLabel = el("span", { id: "pos-label" });
  const prev = el("button", { type: "button", id: "prev", text: "◀", title: "previous (←)" });
  const next = el("button", { type: "button", id: "next", text: "▶", title: "next (→)" });
  const head = el("div", { id: "episode-head" });
  const detail = el("div", { id: "step-detail" });
  main.append(el("section", { id: "replay-view" },
    el("h2", {}, "Episode ", el("span", { id: "episode-id", text: id })), head,
    el("div", { class: "replay" },
      el("div", {}, el("div", { class: "controls" }, prev, scrub, next, posLabel), stage,
        el("p", { class: "muted", text: "← → step · Home/End jump · the marks show the step's actions on the screen the model saw" })),
      detail)));

  let traj = null, screen = { w: 1280, h: 800 }, pos = Math.max(0, parseInt(params.get("pos") || "0", 10) || 0), etag = null;

  const frames = () => {
    const out = [traj.init_frame || ""];
    for (const s of traj.steps) out.push(s.obs_frame || "");
    return out; // out[k] is the screen before step k; out[n] the final one
  };

  function show(k) {
    if (!traj) return;
    const n = traj.steps.length;
    pos = Math.max(0, Math.min(n, k));
    scrub.max = n;
    scrub.value = pos;
    posLabel.textContent = pos < n ? `step ${pos + 1} / ${n}` : `end (${n} steps)`;
    const fs = frames();
    const h = fs[pos];
    if (h) {
      if (img.dataset.frame !== h) { img.src = frameURL(h); img.dataset.frame = h; }
      nof.remove();
      if (!img.isConnected) stage.prepend(img);
      // Warm the browser cache for the next position.
      if (fs[pos + 1]) new Image().src = frameURL(fs[pos + 1]);
    } else {
      img.remove();
      img.dataset.frame = "";
      stage.prepend(nof);
    }
    const step = pos < n ? traj.steps[pos] : null;
    drawActions(step ? step.actions || [] : []);
    renderStep(step, pos, n);
    const q = new URLSearchParams(params); q.set("pos", pos);
    history.replaceState(null, "", "#/episode/" + encodeURIComponent(id) + "?" + q);
  }

  function pt(t) {
    if (!t) return null;
    if (t.kind === "point_norm") return [t.x * screen.w, t.y * screen.h];
    if (t.kind === "point_px" || !t.kind) return [t.x, t.y];
    return null;
  }

  function drawActions(actions) {
    overlay.setAttribute("viewBox", `0 0 ${screen.w} ${screen.h}`);
    overlay.replaceChildren();
    let typedY = 40, cursor = null;
    actions.forEach((a, i) => {
      const g = svg("g", { class: "mark", "data-verb": a.verb });
      let p = a.target ? pt(a.target) : (a.x !== undefined && a.y !== undefined ? [a.x, a.y] : null);
      if (p) cursor = p;
      const label = `${i + 1}`;
      if (p && ["click", "double_click", "right_click", "move", "mouse_down", "mouse_up", "scroll", "drag"].includes(a.verb)) {
        g.append(svg("circle", { cx: p[0], cy: p[1], r: 14 }));
        if (a.verb === "double_click") g.append(svg("circle", { cx: p[0], cy: p[1], r: 22 }));
        if (a.verb === "right_click") g.append(svg("path", { d: `M${p[0] - 10} ${p[1] - 10} L${p[0] + 10} ${p[1] + 10} M${p[0] + 10} ${p[1] - 10} L${p[0] - 10} ${p[1] + 10}` }));
        if (a.verb === "drag" && a.to) {
          const q = pt(a.to);
          if (q) { g.append(svg("line", { x1: p[0], y1: p[1], x2: q[0], y2: q[1] }), svg("circle", { cx: q[0], cy: q[1], r: 6 })); cursor = q; }
        }
        if (a.verb === "scroll") g.append(svg("line", { x1: p[0], y1: p[1], x2: p[0] + (a.dx || 0) * 20, y2: p[1] + (a.dy || 0) * 20 }));
        g.append(svg("text", { x: p[0] + 16, y: p[1] - 14, text: `${label} ${a.verb}` }));
      } else if (a.verb === "type_text" || a.verb === "key") {
        const txt = a.verb === "type_text" ? `⌨ ${a.text || ""}` : `⌨ ${a.keys || ""}`;
        const x = cursor ? cursor[0] : 20, y = cursor ? cursor[1] + 30 : typedY;
        const shown = txt.length > 60 ? txt.slice(0, 57) + "…" : txt;
        g.append(svg("rect", { x: x - 4, y: y - 22, width: shown.length * 12 + 40, height: 30, rx: 4 }),
          svg("text", { class: "typed", x, y, text: `${label} ${shown}` }));
        typedY += 36;
        if (cursor) cursor = [cursor[0], cursor[1] + 36];
      } else {
        g.append(svg("text", { x: 20, y: typedY, text: `${label} ${a.verb}${a.app ? " " + a.app : ""}${a.ms ? " " + a.ms + "ms" : ""}` }));
        typedY += 30;
      }
      overlay.append(g);
    });
  }

  const kv = (pairs, cls) => {
    const shown = pairs.filter(([, v]) => v !== undefined && v !== null && v !== "");
    const val = (v) => (v instanceof Node ? v : el("span", { text: String(v) }));
    if (cls === "kv-row") return el("div", { class: cls }, ...shown.map(([k, v]) => el("span", { class: "pair" }, el("span", { class: "k", text: k }), val(v))));
    return el("div", { class: "kv" }, ...shown.flatMap(([k, v]) => [el("span", { class: "k", text: k }), val(v)]));
  };
  const json = (v) => el("pre", { text: JSON.stringify(v, null, 2) });

  function actionLine(a) {
    const p = a.target ? pt(a.target) : (a.x !== undefined ? [a.x, a.y] : null);
    const parts = [a.verb];
    if (p) parts.push(`(${Math.round(p[0])}, ${Math.round(p[1])})`);
    if (a.to) { const q = pt(a.to); if (q) parts.push(`→ (${Math.round(q[0])}, ${Math.round(q[1])})`); }
    if (a.text) parts.push(JSON.stringify(a.text));
    if (a.keys) parts.push(a.keys);
    if (a.button) parts.push(a.button);
    if (a.dx || a.dy) parts.push(`dx=${a.dx || 0} dy=${a.dy || 0}`);
    if (a.app) parts.push(a.app + (a.args ? " " + a.args.join(" ") : ""));
    if (a.ms) parts.push(a.ms + " ms");
    return parts.join(" ");
  }

  function renderHead() {
    const ex = traj.ended_at ? (traj.exit_reason || "closed") : "running";
    const other = Object.keys(traj).filter((k) => !KNOWN_TRAJ.has(k));
    head.replaceChildren(kv([
      ["task", el("a", { href: "#/episodes?task=" + encodeURIComponent(traj.task), text: traj.task })],
      ["env", traj.env_id], ["exit", badge(ex, "x-" + ex)], ["reward", fmtReward(traj.reward)],
      ["turns", traj.steps.length], ["started", fmtTime(traj.started_at)], ["ended", fmtTime(traj.ended_at)],
      ["seed", traj.seed], ["fork of", traj.fork_of],
      ["export", el("span", {},
        el("a", { id: "raw-link", href: "/ui/api/episodes/" + encodeURIComponent(id), target: "_blank", text: "raw trajectory JSON" }), " · ",
        el("a", { id: "gif-link", href: "/ui/api/episodes/" + encodeURIComponent(id) + "/replay.gif", text: "animated GIF" }))],
    ], "kv-row"), ...envelopeView(), ...other.map((k) => el("div", {}, el("h2", { text: k.replace(/_/g, " ") }), json(traj[k]))));
  }

  // What the episode was allowed to do, and every use of it.
  function envelopeView() {
    const env = traj.envelope;
    if (!env) return [];
    const yes = (b) => (b ? "yes" : "no");
    const out = [el("h2", { text: "Capabilities" }), kv([
      ["apps", (env.apps || []).join(", ") || "none"], ["shell", yes(env.shell)], ["clipboard", yes(env.clipboard)],
      ["trainer exec", yes(env.trainer_exec)], ["trainer files", yes(env.trainer_files)], ["network", env.network],
      ["screen", env.screen_w ? `${env.screen_w}×${env.screen_h}` : ""],
    ], "kv-row")];
    const audit = traj.audit || [];
    const what = (u) => {
      if (u.argv) return u.argv.join(" ");
      if (u.shell) return u.shell;
      if (u.path) return u.path;
      return "";
    };
    const result = (u) => {
      if (u.failed) return el("span", { class: "err", text: u.error || "failed" });
      const parts = [];
      if (u.exit !== undefined && u.exit !== null) parts.push("exit " + u.exit);
      if (u.bytes) parts.push(u.bytes + " bytes");
      if (u.sha256) parts.push("sha256 " + u.sha256.slice(0, 12));
      return parts.join(" · ");
    };
    out.push(el("h2", { text: `Audit (${audit.length})` }), audit.length === 0 ? el("p", { class: "muted", text: "no power used" }) :
      el("table", { id: "audit" },
        el("thead", {}, el("tr", {}, ...["step", "by", "use", "what", "result"].map((h) => el("th", { text: h })))),
        el("tbody", {}, ...audit.map((u) => el("tr", {},
          el("td", { text: String(u.step) }), el("td", { text: u.by }), el("td", { text: u.kind }),
          el("td", { text: what(u) }), el("td", {}, result(u)))))));
    return out;
  }

  // info.settle and info.timings, when the trajectory records them.
  function settleOf(info) {
    const st = info && info.settle;
    if (!st) return [];
    return [["settle", `${st.waited_ms} ms${st.damaged ? ", damaged" : ""}${st.timed_out ? ", timed out" : ""}`]];
  }
  function timingsOf(info) {
    const tm = info && info.timings;
    if (!tm) return [];
    return Object.entries(tm).map(([k, us]) => [k.replace(/_us$/, ""), (us / 1000).toFixed(1) + " ms"]);
  }

  function renderStep(step, k, n) {
    if (!step) {
      detail.replaceChildren(el("h2", { text: "Final screen" }),
        kv([["exit", traj.exit_reason || (traj.ended_at ? "closed" : "running")], ["reward", fmtReward(traj.reward)]]));
      return;
    }
    const toks = [];
    if (step.prompt_ids && step.prompt_ids.length) toks.push(["prompt tokens", step.prompt_ids.length]);
    if (step.response_ids && step.response_ids.length) toks.push(["response tokens", step.response_ids.length]);
    if (step.response_logprobs && step.response_logprobs.length) {
      const lp = step.response_logprobs;
      toks.push(["mean logprob", (lp.reduce((a, b) => a + b, 0) / lp.length).toFixed(3)]);
    }
    const other = Object.keys(step).filter((key) => !KNOWN_STEP.has(key));
    detail.replaceChildren(...[
      el("h2", { text: `Step ${k + 1} of ${n}` }),
      kv([["t", step.t_ms + " ms"], ["reward", fmtReward(step.reward)], ["dialect", step.dialect],
        ...settleOf(step.info), ...timingsOf(step.info),
        ...toks, ["finish", step.finish_reason],
        ["error", step.error ? el("span", { class: "err", text: `${step.error.code}: ${step.error.message}` }) : null]]),
      el("h2", { text: "Actions" }),
      el("ol", { class: "actions" }, ...(step.actions || []).map((a) => el("li", { text: actionLine(a) }))),
      step.text ? el("div", {}, el("h2", { text: "Model text" }), el("pre", { id: "model-text", text: step.text })) : null,
      step.info ? el("div", { id: "step-info" }, el("h2", { text: "Info" }), json(step.info)) : null,
      step.a11y ? el("div", {}, el("h2", { text: "Accessibility tree" }), json(step.a11y)) : null,
      ...other.map((key) => el("div", {}, el("h2", { text: key.replace(/_/g, " ") }), json(step[key])))].filter(Boolean));
  }

  const onKey = (ev) => {
    if (ev.target instanceof HTMLInputElement && ev.target !== scrub) return;
    const moves = { ArrowLeft: -1, ArrowRight: 1, j: 1, k: -1 };
    if (ev.key in moves) { ev.preventDefault(); show(pos + moves[ev.key]); }
    else if (ev.key === "Home") { ev.preventDefault(); show(0); }
    else if (ev.key === "End") { ev.preventDefault(); show(Infinity); }
  };
  document.addEventListener("keydown", onKey);
  scrub.addEventListener("input", () => show(parseInt(scrub.value, 10)));
  prev.addEventListener("click", () => show(pos - 1));
  next.addEventListener("click", () => show(pos + 1));

  getJSON("/ui/api/pool").then((r) => { if (r && r.body.pool.screen_w) { screen = { w: r.body.pool.screen_w, h: r.body.pool.screen_h }; if (traj) show(pos); } }).catch(() => {});
  const stop = poller(async () => {
    if (traj && traj.ended_at) return; // finished: nothing more will come
    const r = await getJSON("/ui/api/episodes/" + encodeURIComponent(id), etag);
    if (!r) return;
    etag = r.etag;
    const atEnd = traj && pos >= traj.steps.length;
    traj = r.body;
    renderHead();
    show(atEnd ? traj.steps.length : pos);
  }, 2000);
  return () => { stop(); document.removeEventListener("keydown", onKey); };
}

// ---- tasks view ----

function tasksView() {
  const tbody = el("tbody");
  const note = el("p", { class: "muted" });
  main.append(el("section", { id: "tasks-view" }, el("h2", { text: "Tasks" }), note,
    el("table", { id: "tasks-table" },
      el("thead", {}, el("tr", {}, ...["task", "instruction (template) and sample instances", "apps", "max steps", "episodes", "running", "pass rate", "mean steps", "mean reward"].map((h) => el("th", { text: h })))),
      tbody)));
  let etag = null;
  return poller(async () => {
    const r = await getJSON("/ui/api/tasks", etag);
    if (!r) return;
    etag = r.etag;
    note.textContent = `Pass rate (reward > 0), mean steps and mean reward over each task's last ${r.body.recent} finished episodes.`;
    tbody.replaceChildren(...r.body.tasks.map((t) => el("tr", { "data-task": t.id },
      el("td", {}, el("a", { href: "#/episodes?task=" + encodeURIComponent(t.id), text: t.id })),
      el("td", { class: "instr" }, el("div", { text: t.instruction + (t.version > 1 ? ` (v${t.version})` : "") }),
        ...(t.params && t.params.length ? [el("div", { class: "muted", text: `params: ${t.params.join(", ")}; test split ${t.test_percent}%` })] : []),
        ...(t.samples || []).map((sm) => el("div", { class: "sample muted", text: `${sm.split} seed ${sm.seed}: ${sm.instruction}` }))),
      el("td", { text: (t.apps || []).join(", ") }),
      el("td", { text: t.max_steps }),
      el("td", { text: t.episodes }), el("td", { text: t.running || "" }),
      el("td", { class: "pass", text: t.episodes ? Math.round(t.pass_rate * 100) + "%" : "–" }),
      el("td", { text: t.episodes ? t.mean_steps.toFixed(1) : "–" }),
      el("td", { text: t.episodes ? fmtReward(t.mean_reward) : "–" }))));
  }, 5000);
}

route();
