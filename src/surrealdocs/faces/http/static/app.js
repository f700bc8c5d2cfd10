// surrealdocs: the search page. Plain JavaScript against the /v1 API; text from documents
// is only ever placed with textContent (never as HTML).
"use strict";

(() => {
  const $ = (sel) => document.querySelector(sel);
  const KEY_STORAGE = "surrealdocs.key";
  const state = {
    mode: "hybrid",
    notebooks: [],
    info: null,
    hits: [],
    terms: [],
    doc: null,       // the document open in the viewer
    chunkAt: -1,     // which of its chunks is highlighted
    searchSeq: 0,
    docsOffset: 0,   // the documents list: how many are shown
    limit: 20,       // hits asked for (More results asks for more)
    weaker: false,   // show hits below the cut-off too (Show weaker matches)
    session: null,   // the conversation Ask goes on with
    turns: [],       // its earlier questions and answers, shown above the answer
  };

  // ----- talking to the API --------------------------------------------------------
  function apiKey() {
    try { return localStorage.getItem(KEY_STORAGE) || ""; } catch (e) { return ""; }
  }
  function headers(extra) {
    const h = Object.assign({ Accept: "application/json" }, extra || {});
    const key = apiKey();
    if (key) h.Authorization = "Bearer " + key;
    return h;
  }
  class ApiError extends Error {
    constructor(status, code, message) { super(message); this.status = status; this.code = code; }
  }
  async function api(path, options) {
    options = options || {};
    const init = { method: options.method || "GET", headers: headers(options.headers) };
    if (options.json !== undefined) {
      init.body = JSON.stringify(options.json);
      init.headers["Content-Type"] = "application/json";
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, "network", "the server cannot be reached");
    }
    let body = null;
    try { body = await response.json(); } catch (e) { body = null; }
    if (!response.ok) {
      const err = (body && body.error) || {};
      const error = new ApiError(response.status, err.code || "error",
        err.message || response.statusText || "request failed");
      if (response.status === 401) needKey(error.message);
      throw error;
    }
    return body;
  }
  const enc = encodeURIComponent;

  // ----- small helpers ---------------------------------------------------------------
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "class") node.className = value;
      else if (name === "text") node.textContent = value;
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  function bytes(n) {
    if (n < 1000) return n + " B";
    const units = ["kB", "MB", "GB", "TB"];
    let i = -1;
    do { n /= 1000; i++; } while (n >= 1000 && i < units.length - 1);
    return (n >= 10 ? n.toFixed(0) : n.toFixed(1)) + " " + units[i];
  }
  function baseName(source) {
    const s = String(source || "").replace(/^[a-z][a-z0-9+.-]*:\/\//i, "");
    const parts = s.split("/").filter(Boolean);
    return parts.length ? parts[parts.length - 1] : String(source || "");
  }
  function banner(message, kind) {
    const b = $("#banner");
    if (!message) { b.hidden = true; return; }
    b.textContent = message;
    b.className = "banner" + (kind ? " " + kind : "");
    b.hidden = false;
  }

  // ----- highlighting ------------------------------------------------------------------
  // The query's words come from the server ("terms": stop words out, rough stems, as the
  // BM25 leg sees them); each marks the words of a text that start with it.
  function termPattern(terms) {
    if (!terms.length) return null;
    const escaped = terms.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
    return new RegExp("(?<![\\p{L}\\p{N}])(?:" + escaped.join("|") + ")[\\p{L}\\p{N}]*", "giu");
  }
  // Append `text` to `parent`, words of `terms` wrapped in <mark>.
  function appendMarked(parent, text, pattern) {
    if (!pattern) { parent.append(text); return; }
    let last = 0;
    pattern.lastIndex = 0;
    for (const m of text.matchAll(pattern)) {
      if (m.index > last) parent.append(text.slice(last, m.index));
      parent.append(el("mark", { text: m[0] }));
      last = m.index + m[0].length;
    }
    if (last < text.length) parent.append(text.slice(last));
  }
  // Append a hit's snippet (from the server: its text and the spans of the query's words).
  function appendSnippet(parent, hit) {
    const shown = hit.snippet || { text: String(hit.content || "").slice(0, 340), marks: [] };
    let last = 0;
    for (const [start, end] of shown.marks || []) {
      if (start < last) continue;
      if (start > last) parent.append(shown.text.slice(last, start));
      parent.append(el("mark", { text: shown.text.slice(start, end) }));
      last = end;
    }
    if (last < shown.text.length) parent.append(shown.text.slice(last));
  }

  // ----- search ------------------------------------------------------------------------
  function setMode(mode) {
    state.mode = mode;
    for (const b of document.querySelectorAll(".modes button")) {
      b.setAttribute("aria-checked", String(b.dataset.mode === mode));
    }
    showAskPrompt();
  }
  // What the box asks for: in Ask mode within a conversation, a follow-up is read with
  // the questions before it (said, not silently done).
  function showAskPrompt() {
    const box = $("#q");
    const following = state.mode === "ask" && state.session && (state.turns.length || state.lastTurn);
    box.placeholder = state.mode !== "ask" ? "Search your documents"
      : following ? "A follow-up: read with this conversation's questions (New conversation to start over)"
        : "Ask a question about your documents";
    $("#follow-up").hidden = !following;
  }
  function syncUrl(q) {
    const params = new URLSearchParams();
    if (q) params.set("q", q);
    if (state.mode !== "hybrid") params.set("mode", state.mode);
    if ($("#notebook").value) params.set("notebook", $("#notebook").value);
    const url = params.toString() ? "?" + params.toString() : location.pathname;
    history.replaceState(null, "", url);
  }

  function searchParams(q) {
    const params = new URLSearchParams({ query: q, mode: state.mode, limit: String(state.limit) });
    if ($("#notebook").value) params.set("notebook", $("#notebook").value);
    if ($("#f-type").value) params.append("mime_type", $("#f-type").value);
    if ($("#f-source").value.trim()) params.set("source", $("#f-source").value.trim());
    if ($("#f-after").value) params.set("created_after", $("#f-after").value + "T00:00:00");
    if ($("#f-per-doc").checked) params.set("per_document", "true");
    for (const where of whereTexts()) params.append("where", where);
    if (state.info && state.info.rerank) params.set("rerank", $("#f-rerank").checked ? "true" : "false");
    if (state.weaker) params.set("cutoff", "false");
    return params;
  }
  // the metadata filters typed in the filter row, ";" between them
  function whereTexts() {
    return $("#f-where").value.split(";").map((w) => w.trim()).filter(Boolean);
  }

  async function search(more, weaker) {
    if (state.mode === "ask") return ask();
    state.weaker = more ? state.weaker : Boolean(weaker);
    $("#answer").hidden = true;
    $("#conversation").hidden = true;
    const q = $("#q").value.trim();
    syncUrl(q);
    state.limit = more ? state.limit + 20 : 20;
    if (!q) { renderHits([], ""); return; }
    const seq = ++state.searchSeq;
    const params = searchParams(q);
    $("#empty").hidden = true;
    $("#summary").textContent = "Searching…";
    if (!more) $("#results").replaceChildren(el("li", { class: "skeleton" }), el("li", { class: "skeleton" }));
    try {
      const result = await api("/v1/search?" + params.toString());
      if (seq !== state.searchSeq) return;  // a newer search is under way
      state.terms = result.terms || [];
      renderHits(result.hits, q, result.took_ms, result.notice);
    } catch (e) {
      if (seq !== state.searchSeq) return;
      $("#results").replaceChildren();
      $("#summary").textContent = "";
      banner("Search failed: " + e.message, "error");
    }
  }

  // ----- ask: an answer streamed from the documents, its citations opening passages -------
  function renderAnswerText(text, passages) {
    const box = $("#answer-text");
    box.replaceChildren();
    let at = 0;
    for (const m of text.matchAll(/\[(\d+)\]/g)) {
      box.append(text.slice(at, m.index));
      const n = Number(m[1]);
      box.append(passages[n - 1]
        ? el("button", { class: "cite", type: "button", "data-n": String(n),
            title: passages[n - 1].title || passages[n - 1].source, onclick: () => openHit(n - 1) }, `[${n}]`)
        : `[${n}]`);
      at = m.index + m[0].length;
    }
    box.append(text.slice(at));
  }

  async function ask() {
    const q = $("#q").value.trim();
    syncUrl(q);
    $("#results").replaceChildren();
    $("#more-results").hidden = true;
    $("#weaker-results").hidden = true;
    if (!q) { $("#answer").hidden = true; renderHits([], ""); return; }
    const seq = ++state.searchSeq;
    if (!state.session) {  // the first question starts a conversation, in the notebook picked
      try {
        const made = await api("/v1/conversations", { method: "POST",
          json: { title: q.slice(0, 80), notebook: $("#notebook").value || null } });
        state.session = made.id;
      } catch (e) { state.session = null; }  // a read-only key: one question at a time
    }
    const body = { question: q, stream: true };
    if (state.session) body.conversation = state.session;
    if ($("#notebook").value) body.notebook = $("#notebook").value;
    if ($("#f-type").value) body.mime_type = [$("#f-type").value];
    if ($("#f-source").value.trim()) body.source = $("#f-source").value.trim();
    if ($("#f-after").value) body.created_after = $("#f-after").value + "T00:00:00";
    if (whereTexts().length) body.where = whereTexts();
    if (state.info && state.info.rerank) body.rerank = $("#f-rerank").checked;
    $("#empty").hidden = true;
    $("#answer").hidden = false;
    if (state.session && state.lastTurn) { state.turns.push(state.lastTurn); state.lastTurn = null; }
    state.asked = q;
    renderTurns();
    $("#answer-text").textContent = "";
    $("#answer-sources").replaceChildren();
    for (const note of document.querySelectorAll("#answer .note")) note.remove();
    $("#summary").textContent = "Finding passages…";
    state.terms = [];
    let passages = [], text = "";
    try {
      const response = await fetch("/v1/ask", { method: "POST",
        headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
        body: JSON.stringify(body) });
      if (!response.ok) {
        let message = response.statusText;
        try { message = (await response.json()).error.message; } catch (e) { /* keep it */ }
        throw new Error(message);
      }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done || seq !== state.searchSeq) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const chunk = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const kind = (chunk.match(/^event: (.*)$/m) || [])[1];
          const data = (chunk.match(/^data: (.*)$/m) || [])[1];
          if (!kind || data === undefined) continue;
          const value = JSON.parse(data);
          if (kind === "terms") {
            state.terms = value;
          } else if (kind === "passages") {
            passages = value;
            state.hits = passages;
            $("#summary").textContent = `${passages.length} passage${passages.length === 1 ? "" : "s"} · writing the answer…`;
          } else if (kind === "text") {
            text += value;
            renderAnswerText(text, passages);
          } else if (kind === "answer") {
            showAnswer(value, body.conversation);
          } else if (kind === "error") {
            throw new Error(value.message);
          }
        }
      }
    } catch (e) {
      if (seq !== state.searchSeq) return;
      $("#summary").textContent = "";
      $("#answer").hidden = true;
      banner("Ask failed: " + e.message, "error");
    }
  }

  function renderTurns() {
    $("#conversation").hidden = !state.session;
    $("#turns").replaceChildren(...state.turns.map((t) => el("li", {},
      el("div", { class: "q", text: t.question }), el("div", { class: "a", text: t.answer }))));
  }

  function showAnswer(result, session) {
    if (session) {  // the turn is kept: the list shows it (also if a new conversation began)
      if (state.session === session) state.lastTurn = { question: state.asked, answer: result.answer };
      loadChats();
      showAskPrompt();
    }
    state.hits = result.passages;
    renderAnswerText(result.answer, result.passages);
    const sources = $("#answer-sources");
    sources.replaceChildren(...result.citations.map((c) => el("li", { value: String(c.number) },
      el("button", { type: "button", onclick: () => openHit(c.number - 1) },
        `${c.title || baseName(c.source)}${c.page ? ` · page ${c.page}` : ""}`))));
    const notes = [];
    if (result.removed_citations) notes.push(`${result.removed_citations} citation${result.removed_citations === 1 ? "" : "s"} of no passage removed`);
    if (!result.grounded && result.passages.length) notes.push("the answer cites no passage: it is not grounded");
    if (notes.length) sources.after(el("p", { class: "note", text: notes.join("; ") }));
    $("#summary").textContent = result.model
      ? `${result.citations.length} source${result.citations.length === 1 ? "" : "s"} · ${result.model}`
      : "Nothing in the documents answers this.";
  }

  function renderHits(hits, q, tookMs, notice) {
    state.hits = hits;
    const list = $("#results");
    list.replaceChildren();
    banner("");
    if (!q) {
      $("#summary").textContent = "";
      $("#empty").hidden = false;
      $("#more-results").hidden = true;
      $("#weaker-results").hidden = true;
      return;
    }
    $("#empty").hidden = true;
    $("#more-results").hidden = hits.length < state.limit;
    // nothing probably relevant: the weaker matches are one click away
    $("#weaker-results").hidden = hits.length > 0 || state.weaker || !notice
      || !/looks relevant/.test(notice);
    const weaker = state.weaker ? " · weaker matches shown" : "";
    if (hits.length && notice) banner(notice);  // e.g. the reranker failed: first-stage order
    $("#summary").textContent = hits.length
      ? `${hits.length} passage${hits.length === 1 ? "" : "s"} · ${state.mode}${hits.some((h) => h.rerank_score != null) ? " · reranked" : ""} · ${Math.round(tookMs)} ms${weaker}`
      : notice ? `No passages: ${notice.replace(/ \(cutoff=false [^)]*\)/, "")}.`
        : "No passages match. Try other words, or the Vector mode for meaning.";
    hits.forEach((hit, i) => {
      const text = el("p", { class: "snippet" });
      appendSnippet(text, hit);
      const meta = el("div", { class: "hit-meta" },
        el("span", { class: "source", text: hit.source }),
        hit.context ? el("span", { class: "section", text: hit.context }) : null,
        hit.page ? el("span", { text: hit.last_page && hit.last_page !== hit.page
          ? `pages ${hit.page}–${hit.last_page}` : `page ${hit.page}` }) : null,
        state.mode === "hybrid" ? el("span", {
          text: `text #${hit.text_rank || "–"} · vector #${hit.vector_rank || "–"}`,
          title: "Rank of this passage in each leg of the hybrid search" }) : null,
        ...Object.entries(hit.metadata || {}).slice(0, 6).map(([key, value]) => el("span", {
          class: "meta-tag", title: "Metadata of the document (filter on it with where)",
          text: `${key}: ${Array.isArray(value) ? value.join(", ") : String(value)}`.slice(0, 80) })));
      const button = el("button", {
        class: "hit", type: "button", "data-index": String(i),
        "aria-label": `Open ${hit.title || baseName(hit.source)} at this passage`,
        onclick: () => openHit(i) },
        el("div", { class: "hit-head" },
          el("span", { class: "hit-title", text: hit.title || baseName(hit.source) }),
          el("span", { class: "score", title: "How likely this passage is to be relevant",
            text: `${Math.round(hit.score * 100)}%` })),
        meta, text);
      list.append(el("li", {}, button));
    });
  }

  // ----- the document viewer --------------------------------------------------------------
  async function openHit(i) {
    const hit = state.hits[i];
    if (!hit) return;
    const viewer = $("#viewer");
    $("#viewer-title").textContent = hit.title || baseName(hit.source);
    $("#viewer-meta").textContent = hit.source;
    $("#viewer-body").replaceChildren(el("p", { class: "loading", text: "Loading the document…" }));
    if (!viewer.open) viewer.showModal();
    try {
      const doc = await api("/v1/documents/" + enc(hit.document_id));
      state.doc = doc;
      const chunks = doc.chunks || [];
      let at = chunks.findIndex((c) => c.chunk_id === hit.chunk_id);
      if (at < 0) at = chunks.findIndex((c) => c.char_start === hit.char_start);
      showChunk(at >= 0 ? at : -1, { start: hit.char_start, end: hit.char_end });
    } catch (e) {
      $("#viewer-body").replaceChildren(el("p", { class: "loading", text: "Cannot open it: " + e.message }));
    }
  }

  function showChunk(index, span) {
    const doc = state.doc;
    if (!doc) return;
    const chunks = doc.chunks || [];
    state.chunkAt = index;
    const chunk = index >= 0 ? chunks[index] : null;
    const start = chunk ? chunk.char_start : span.start;
    const end = chunk ? chunk.char_end : span.end;
    const text = doc.content || "";
    const pattern = termPattern(state.terms);
    const body = $("#viewer-body");
    const mark = el("span", { class: "chunk", id: "current-chunk" });
    appendMarked(mark, text.slice(start, end), pattern);
    body.replaceChildren(text.slice(0, start), mark, text.slice(end));
    const pages = chunk && chunk.page ? (chunk.last_page && chunk.last_page !== chunk.page
      ? ` · pages ${chunk.page}–${chunk.last_page}` : ` · page ${chunk.page}`) : "";
    const where = chunk ? ` · passage ${index + 1} of ${chunks.length}` : "";
    $("#viewer-meta").textContent = `${doc.source || doc.id}${pages}${where} · characters ${start}–${end}`;
    $("#prev-chunk").disabled = !chunk || index <= 0;
    $("#next-chunk").disabled = !chunk || index >= chunks.length - 1;
    requestAnimationFrame(() => mark.scrollIntoView({ block: "center" }));
  }

  // ----- uploads ---------------------------------------------------------------------------
  const STATUS_TEXT = {
    ingested: ["ok", "added"], updated: ["ok", "updated"], unchanged: ["ok", "unchanged"],
    duplicate: ["ok", "duplicate of a stored text"], empty: ["warn", "no text found"],
    failed: ["bad", "failed"],
  };

  function uploadFiles(fileList) {
    const files = Array.from(fileList || []);
    if (!files.length) return;
    if (state.info && !state.info.can_write) {
      banner("This key is read-only: it cannot add documents.", "error");
      return;
    }
    const limits = (state.info && state.info.limits) || {};
    const rows = new Map();
    const accepted = [];
    for (const file of files) {
      const name = file.webkitRelativePath || file.name;
      const row = uploadRow(name, file.size);
      if (limits.max_file_bytes && file.size > limits.max_file_bytes) {
        setRow(row, "failed", "bad", "too large", `over the limit of ${bytes(limits.max_file_bytes)} per file`);
        continue;
      }
      rows.set("upload://" + name.replace(/\\/g, "/").split("/").filter((p) => p && p !== "." && p !== "..").join("/"), row);
      accepted.push({ file, name, row });
    }
    if (!accepted.length) return;
    const form = new FormData();
    for (const a of accepted) form.append("files", a.file, a.name);
    const notebook = $("#upload-notebook").value;
    const xhr = new XMLHttpRequest();
    xhr.open("POST", "/v1/uploads" + (notebook ? "?notebook=" + enc(notebook) : ""));
    const h = headers();
    for (const [k, v] of Object.entries(h)) xhr.setRequestHeader(k, v);
    // one request carries the files one after the other: each file's share of the bytes sent
    const total = accepted.reduce((n, a) => n + a.file.size, 0) || 1;
    xhr.upload.addEventListener("progress", (ev) => {
      let sent = ev.loaded * (total / (ev.total || total));
      for (const a of accepted) {
        const part = Math.max(0, Math.min(1, sent / (a.file.size || 1)));
        sent -= a.file.size;
        setBar(a.row, part * 0.5);
        if (part < 1) a.row.state.textContent = `uploading ${Math.round(part * 100)}%`;
        else a.row.state.textContent = "waiting";
      }
    });
    xhr.addEventListener("load", () => {
      let body = null;
      try { body = JSON.parse(xhr.responseText); } catch (e) { body = null; }
      if (xhr.status !== 202 || !body || !body.job) {
        const err = (body && body.error) || {};
        for (const a of accepted) setRow(a.row, "failed", "bad", "not uploaded", err.message || `HTTP ${xhr.status}`);
        if (xhr.status === 401) needKey(err.message);
        return;
      }
      // the server names each file (a name another file holds gets " (2)"): follow those
      rows.clear();
      (body.files || []).forEach((f, i) => {
        const a = accepted[i];
        if (!a) return;
        rows.set(f.source, a.row);
        if (f.renamed_from) {
          a.row.reason.textContent = `another file has this name: stored as ${f.source.replace(/^upload:\/\//, "")}`;
          a.row.reason.className = "upload-reason warn";
          a.row.reason.hidden = false;
        }
      });
      for (const a of accepted) { setBar(a.row, 0.5); a.row.state.textContent = "queued"; }
      followJob(body.job.id, rows);
    });
    xhr.addEventListener("error", () => {
      for (const a of accepted) setRow(a.row, "failed", "bad", "not uploaded", "the connection failed");
    });
    xhr.send(form);
  }

  // A web page: fetched and ingested by a job on the server (POST /v1/urls).
  async function addUrl(url) {
    if (state.info && !state.info.can_write) {
      banner("This key is read-only: it cannot add documents.", "error");
      return;
    }
    let source = url;
    try { const u = new URL(url); u.hash = ""; source = u.href; } catch (e) { /* the server says */ }
    const row = uploadRow(source, null);
    const notebook = $("#upload-notebook").value;
    let body;
    try {
      body = await api("/v1/urls", { method: "POST", json: { urls: [url], notebook: notebook || null } });
    } catch (e) {
      setRow(row, "failed", "bad", "not added", e.message);
      if (e.status === 401) needKey(e.message);
      return;
    }
    row.state.textContent = "queued";
    setBar(row, 0.3);
    followJob(body.job.id, new Map([[source, row]]));
  }

  function uploadRow(name, size) {
    const bar = el("span");
    const stateEl = el("span", { class: "upload-state", text: "starting" });
    const reason = el("div", { class: "upload-reason", hidden: true });
    const li = el("li", { class: "upload", "data-name": name },
      el("div", { class: "upload-line" },
        el("span", { class: "upload-name", title: name,
          text: size === null ? name : `${baseName(name)} · ${bytes(size)}` }), stateEl),
      el("div", { class: "progress" }, bar), reason);
    $("#uploads").prepend(li);
    return { li, bar, state: stateEl, reason };
  }
  function setBar(row, fraction) { row.bar.style.width = Math.round(fraction * 100) + "%"; }
  function setRow(row, status, tone, text, reason) {
    row.li.classList.toggle("failed", tone === "bad");
    row.li.classList.toggle("done", tone !== "bad");
    row.li.dataset.status = status;
    row.state.className = "upload-state " + tone;
    row.state.textContent = text;
    setBar(row, 1);
    if (reason) {
      row.reason.textContent = reason;
      row.reason.className = "upload-reason" + (tone === "warn" ? " warn" : "");
      row.reason.hidden = false;
    }
  }

  function applyJob(job, rows) {
    const result = job.result || {};
    for (const r of result.results || []) {
      const row = rows.get(r.source);
      if (!row || row.li.dataset.status) continue;
      const [tone, text] = STATUS_TEXT[r.status] || ["ok", r.status];
      const passages = r.chunks === 1 ? "1 passage" : `${r.chunks} passages`;
      setRow(row, r.status, tone, r.chunks ? `${text} · ${passages}` : text, r.reason);
    }
    const doing = result.doing || {};  // what each file in flight is doing
    for (const [source, row] of rows) {
      if (row.li.dataset.status) continue;
      if (job.status === "running") {
        row.state.textContent = doing[source] ? doing[source] + "…" : doing[""] ? doing[""] + "…" : "waiting…";
        setBar(row, 0.5 + 0.4 * (job.progress || 0));
      }
      if (job.status === "failed") setRow(row, "failed", "bad", "failed", job.error || "the job failed");
      if (job.status === "done") setRow(row, "done", "ok", "done");
    }
  }

  // Server-Sent Events through fetch (so the key can go in a header), with polling as the
  // fallback.
  async function followJob(id, rows) {
    const path = "/v1/jobs/" + enc(id);
    let finished = false;
    try {
      const response = await fetch(path + "/events", { headers: headers({ Accept: "text/event-stream" }) });
      if (!response.ok || !response.body) throw new Error("no stream");
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          let event = "message", data = "";
          for (const line of block.split("\n")) {
            if (line.startsWith("event:")) event = line.slice(6).trim();
            else if (line.startsWith("data:")) data += line.slice(5).trim();
          }
          if (event === "job" && data) {
            const job = JSON.parse(data);
            applyJob(job, rows);
            if (job.status === "done" || job.status === "failed") finished = true;
          }
        }
      }
    } catch (e) { /* fall back to polling below */ }
    while (!finished) {
      try {
        const job = await api(path);
        applyJob(job, rows);
        finished = job.status === "done" || job.status === "failed";
      } catch (e) { if (e.status === 404) break; }
      if (!finished) await new Promise((r) => setTimeout(r, 1000));
    }
    refreshSide();
  }

  // ----- conversations of Ask -------------------------------------------------------------
  async function loadChats() {
    const panel = $("#chats-panel");
    panel.hidden = !(state.info && state.info.llm);
    if (panel.hidden) return;
    let out;
    try { out = await api("/v1/conversations"); } catch (e) { return; }
    const list = $("#chats");
    list.replaceChildren();
    if (!(out.conversations || []).length) {
      list.append(el("li", { class: "muted small", text: "None yet: Ask starts one." }));
    }
    const writable = !state.info || state.info.can_write;
    for (const s of out.conversations || []) {
      list.append(el("li", { "data-id": s.id },
        el("button", { class: "doc", type: "button", title: s.title, onclick: () => openChat(s.id) },
          el("span", { class: "doc-name", text: s.title }),
          el("span", { class: "doc-meta", text: `${s.turn_count} question${s.turn_count === 1 ? "" : "s"}` })),
        writable ? el("button", { class: "delete", type: "button", title: `Delete ${s.title}`,
          "aria-label": `Delete conversation ${s.title}`, onclick: () => deleteChat(s) }, "✕") : null));
    }
  }
  async function openChat(id) {
    let chat;
    try { chat = await api("/v1/conversations/" + enc(id)); }
    catch (e) { banner("Cannot open it: " + e.message, "error"); return; }
    setMode("ask");
    state.session = chat.id;
    state.turns = chat.turns.map((t) => ({ question: t.question, answer: t.answer }));
    state.lastTurn = null;
    renderTurns();
    showAskPrompt();
    $("#empty").hidden = true;
    $("#results").replaceChildren();
    $("#answer").hidden = true;
    $("#summary").textContent = `${chat.title} · ask to go on`;
    $("#q").value = "";
    $("#q").focus();
  }
  async function deleteChat(s) {
    if (!confirm(`Delete the conversation “${s.title}”?`)) return;
    try { await api("/v1/conversations/" + enc(s.id), { method: "DELETE" }); }
    catch (e) { banner("Cannot delete it: " + e.message, "error"); }
    if (state.session === s.id) { state.session = null; state.turns = []; state.lastTurn = null; renderTurns(); }
    loadChats();
  }

  // ----- documents: what is stored, a page at a time -------------------------------------
  const DOCS_PAGE = 20;
  async function loadDocuments(more) {
    const scope = $("#notebook").value;
    const nb = state.notebooks.find((n) => n.id === scope);
    $("#documents-title").textContent = nb ? `In ${nb.name}` : "Documents";
    if (!more) state.docsOffset = 0;
    const params = new URLSearchParams({ offset: String(state.docsOffset), limit: String(DOCS_PAGE) });
    if (scope) params.set("notebook", scope);
    let out;
    try { out = await api("/v1/documents?" + params); }
    catch (e) { $("#documents").replaceChildren(el("li", { class: "muted small", text: e.message })); return; }
    const list = $("#documents");
    if (!more) list.replaceChildren();
    const docs = out.documents || [];
    if (!docs.length && !more) {
      list.append(el("li", { class: "muted small", text: nb ? "No documents in this notebook." : "Nothing stored yet." }));
    }
    const writable = !state.info || state.info.can_write;
    for (const doc of docs) {
      const name = doc.title || baseName(doc.source || doc.id);
      const meta = [doc.source, doc.mime_type, `${doc.chunk_count} passage${doc.chunk_count === 1 ? "" : "s"}`]
        .filter(Boolean).join(" · ");
      list.append(el("li", { "data-id": doc.id },
        el("button", { class: "doc", type: "button", title: doc.source || name, onclick: () => openDocument(doc) },
          el("span", { class: "doc-name", text: name }), el("span", { class: "doc-meta", text: meta })),
        writable ? el("button", {
          class: "delete", type: "button", title: `Delete ${name} (its passages go with it)`,
          "aria-label": `Delete document ${name}`, onclick: () => deleteDocument(doc, name) }, "✕") : null));
    }
    state.docsOffset += docs.length;
    const total = out.total || 0;
    $("#documents-count").textContent = total ? `${total}` : "";
    $("#documents-more").hidden = state.docsOffset >= total;
  }
  async function openDocument(doc) {
    state.terms = [];
    const viewer = $("#viewer");
    $("#viewer-title").textContent = doc.title || baseName(doc.source || doc.id);
    $("#viewer-meta").textContent = doc.source || doc.id;
    $("#viewer-body").replaceChildren(el("p", { class: "loading", text: "Loading the document…" }));
    if (!viewer.open) viewer.showModal();
    try {
      state.doc = await api("/v1/documents/" + enc(doc.id));
      showChunk(state.doc.chunks && state.doc.chunks.length ? 0 : -1, { start: 0, end: 0 });
    } catch (e) {
      $("#viewer-body").replaceChildren(el("p", { class: "loading", text: "Cannot open it: " + e.message }));
    }
  }
  async function deleteDocument(doc, name) {
    if (!confirm(`Delete “${name}”? Its text and passages leave the store.`)) return;
    try { await api("/v1/documents/" + enc(doc.id), { method: "DELETE" }); }
    catch (e) { banner("Cannot delete it: " + e.message, "error"); }
    refreshSide();
  }

  // ----- notebooks, stats, key -----------------------------------------------------------
  function fillNotebookSelect(select, first, keep) {
    const current = keep !== undefined ? keep : select.value;
    select.replaceChildren(el("option", { value: "", text: first }),
      ...state.notebooks.map((nb) => el("option", { value: nb.id, text: nb.name })));
    select.value = state.notebooks.some((nb) => nb.id === current) ? current : "";
  }
  function renderNotebooks() {
    const scope = $("#notebook").value;
    const list = $("#notebooks");
    list.replaceChildren();
    if (!state.notebooks.length) {
      list.append(el("li", { class: "muted small", text: "None yet: group sources to search them alone." }));
    }
    const writable = !state.info || state.info.can_write;
    for (const nb of state.notebooks) {
      list.append(el("li", {},
        el("button", {
          class: "nb" + (nb.id === scope ? " active" : ""), type: "button",
          title: nb.description || `Search within ${nb.name}`,
          onclick: () => { $("#notebook").value = nb.id === scope ? "" : nb.id; renderNotebooks(); loadDocuments(); search(); } },
          el("span", { text: nb.name }), el("span", { class: "count", text: String(nb.source_count || 0) })),
        writable ? el("button", {
          class: "delete", type: "button", title: `Delete ${nb.name} (its sources stay)`,
          "aria-label": `Delete notebook ${nb.name}`, onclick: () => deleteNotebook(nb) }, "✕") : null));
    }
  }
  async function loadNotebooks(keep) {
    try {
      const out = await api("/v1/notebooks");
      state.notebooks = out.notebooks || [];
    } catch (e) { state.notebooks = []; }
    fillNotebookSelect($("#notebook"), "All documents", keep);
    fillNotebookSelect($("#upload-notebook"), "None");
    renderNotebooks();
  }
  async function deleteNotebook(nb) {
    if (!confirm(`Delete the notebook “${nb.name}”? Its sources stay in the store.`)) return;
    try { await api("/v1/notebooks/" + enc(nb.id), { method: "DELETE" }); }
    catch (e) { banner("Cannot delete it: " + e.message, "error"); }
    loadNotebooks();
  }
  async function loadStats() {
    const dl = $("#stats");
    try {
      const s = await api("/v1/stats");
      const rows = [["Documents", s.documents], ["Passages", s.chunks], ["Notebooks", s.notebooks],
        ["Model", `${s.model} (${s.dimension})`], ["Not yet in the vector graph", s.vectors_outside_graph]];
      dl.replaceChildren(...rows.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: String(v) })]));
      const type = $("#f-type");
      const chosen = type.value;
      type.replaceChildren(el("option", { value: "", text: "Any" }),
        ...Object.keys(s.mime_types || {}).sort().map((m) => el("option", { value: m, text: m })));
      type.value = chosen;
    } catch (e) {
      dl.replaceChildren(el("dt", { text: "Unavailable" }), el("dd", { text: e.message }));
    }
  }
  function refreshSide() { loadNotebooks(); loadStats(); loadDocuments(); loadChats(); }

  async function loadInfo() {
    try {
      state.info = await api("/v1/info");
    } catch (e) {
      banner("The server cannot be reached: " + e.message, "error");
      return false;
    }
    const info = state.info;
    const button = $("#key-button");
    button.classList.toggle("set", !!apiKey() && info.authenticated && info.auth_required);
    button.classList.toggle("needed", !!info.auth_required && !info.authenticated);
    $("#key-label").textContent = info.key ? info.key.name + (info.key.read_only ? " (read-only)" : "") : "Key";
    button.hidden = !info.auth_required && !apiKey();
    const limits = info.limits || {};
    $("#limits").textContent = limits.max_file_bytes ? `Up to ${bytes(limits.max_file_bytes)} per file.` : "";
    $("#upload-panel").hidden = !info.can_write && info.authenticated;
    $("#new-notebook").hidden = !info.can_write;
    document.querySelector('.modes [data-mode="ask"]').hidden = !info.llm;
    $("#f-rerank-label").hidden = !info.rerank;  // a toggle only where the server reranks
    $("#f-rerank-name").textContent = info.rerank ? `(${info.rerank})` : "";
    if (info.state !== "ready") {
      banner(`The server is ${info.state}…`);
      setTimeout(start, 1000);
      return false;
    }
    if (info.auth_required && !info.authenticated) {
      needKey(apiKey() ? "This key is not accepted." : "This server needs an API key.");
      return false;
    }
    return true;
  }
  function needKey(message) {
    banner((message || "An API key is needed.") + " Click the key button to enter one.", "error");
    const dialog = $("#key-dialog");
    $("#key-status").textContent = message || "";
    $("#key-status").className = "small bad";
    $("#key-button").hidden = false;
    $("#key-button").classList.add("needed");
    if (!dialog.open) { $("#key-input").value = apiKey(); dialog.showModal(); }
  }

  async function start() {
    // the search in the address (a shared link, a reload) shows at once, runs once allowed
    const params = new URLSearchParams(location.search);
    if (["hybrid", "vector", "text", "ask"].includes(params.get("mode"))) setMode(params.get("mode"));
    if (params.get("q") && !$("#q").value) $("#q").value = params.get("q");
    if (await loadInfo()) {
      banner("");
      await loadNotebooks(params.get("notebook") || "");
      loadStats();
      loadDocuments();
      loadChats();
      if ($("#q").value.trim()) search();
    }
  }

  // ----- wiring ------------------------------------------------------------------------------
  function wire() {
    $("#search-form").addEventListener("submit", (e) => { e.preventDefault(); search(); });
    for (const b of document.querySelectorAll(".modes button")) {
      b.addEventListener("click", () => {
        setMode(b.dataset.mode);
        if (b.dataset.mode === "ask") {  // a question is asked, not the last search's words
          $("#answer").hidden = true;
          $("#summary").textContent = "Type a question, then press Enter to ask the model.";
          $("#q").focus(); $("#q").select();
          return;
        }
        if ($("#q").value.trim()) search();
      });
    }
    $("#notebook").addEventListener("change", () => { renderNotebooks(); loadDocuments(); if ($("#q").value.trim()) search(); });
    $("#documents-more").addEventListener("click", () => loadDocuments(true));
    $("#more-results").addEventListener("click", () => search(true));
    $("#weaker-results").addEventListener("click", () => search(false, true));
    $("#new-conversation").addEventListener("click", () => {
      state.session = null; state.turns = []; state.lastTurn = null;
      renderTurns();
      showAskPrompt();
      $("#answer").hidden = true;
      $("#q").value = ""; $("#q").focus();
    });
    for (const id of ["#f-type", "#f-after", "#f-per-doc", "#f-rerank"]) {
      $(id).addEventListener("change", () => { if ($("#q").value.trim()) search(); });
    }
    $("#f-source").addEventListener("keydown", (e) => {
      if (e.key === "Enter") { e.preventDefault(); if ($("#q").value.trim()) search(); }
    });

    const drop = $("#dropzone"), input = $("#file-input");
    drop.addEventListener("click", () => input.click());
    drop.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); input.click(); } });
    input.addEventListener("change", () => { uploadFiles(input.files); input.value = ""; });
    for (const type of ["dragenter", "dragover"]) {
      drop.addEventListener(type, (e) => { e.preventDefault(); drop.classList.add("over"); });
    }
    for (const type of ["dragleave", "dragend"]) drop.addEventListener(type, () => drop.classList.remove("over"));
    drop.addEventListener("drop", (e) => {
      e.preventDefault();
      e.stopPropagation();  // not again by the page's own drop handler below
      drop.classList.remove("over");
      uploadFiles(e.dataTransfer && e.dataTransfer.files);
    });
    $("#url-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const url = $("#url-input").value.trim();
      if (url) { addUrl(url); $("#url-input").value = ""; }
    });
    // dropping anywhere on the page uploads too, instead of the browser opening the file
    window.addEventListener("dragover", (e) => e.preventDefault());
    window.addEventListener("drop", (e) => { e.preventDefault(); uploadFiles(e.dataTransfer && e.dataTransfer.files); });

    $("#new-notebook").addEventListener("click", () => {
      const form = $("#notebook-form");
      form.hidden = !form.hidden;
      if (!form.hidden) $("#notebook-name").focus();
    });
    $("#notebook-form").addEventListener("submit", async (e) => {
      e.preventDefault();
      const name = $("#notebook-name").value.trim();
      if (!name) return;
      try {
        const nb = await api("/v1/notebooks", { method: "POST", json: { name } });
        $("#notebook-name").value = "";
        $("#notebook-form").hidden = true;
        await loadNotebooks();  // uploads keep going where they went: pick it to upload into it
        banner(`Notebook “${nb.name}” created: choose it under “Into notebook” to upload into it.`);
        loadStats();
      } catch (err) { banner("Cannot create it: " + err.message, "error"); }
    });

    $("#viewer-close").addEventListener("click", () => $("#viewer").close());
    $("#viewer").addEventListener("click", (e) => { if (e.target === $("#viewer")) $("#viewer").close(); });
    $("#viewer").addEventListener("close", () => {
      const i = state.hits.findIndex((h) => state.doc && h.document_id === state.doc.id);
      const button = document.querySelector(`.hit[data-index="${Math.max(i, 0)}"]`);
      if (button) button.focus();
    });
    $("#prev-chunk").addEventListener("click", () => showChunk(state.chunkAt - 1));
    $("#next-chunk").addEventListener("click", () => showChunk(state.chunkAt + 1));

    $("#key-button").addEventListener("click", () => {
      $("#key-input").value = apiKey();
      $("#key-status").textContent = "";
      $("#key-dialog").showModal();
    });
    $("#key-cancel").addEventListener("click", () => $("#key-dialog").close());
    $("#key-clear").addEventListener("click", () => {
      try { localStorage.removeItem(KEY_STORAGE); } catch (e) { /* private mode */ }
      $("#key-dialog").close();
      start();
    });
    $("#key-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const key = $("#key-input").value.trim();
      try { if (key) localStorage.setItem(KEY_STORAGE, key); else localStorage.removeItem(KEY_STORAGE); }
      catch (err) { /* private mode */ }
      $("#key-dialog").close();
      start();
    });

    document.addEventListener("keydown", (e) => {
      const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName);
      if ($("#viewer").open) {
        if (e.key === "j" || (e.key === "ArrowDown" && e.altKey)) { e.preventDefault(); if (!$("#next-chunk").disabled) showChunk(state.chunkAt + 1); }
        if (e.key === "k" || (e.key === "ArrowUp" && e.altKey)) { e.preventDefault(); if (!$("#prev-chunk").disabled) showChunk(state.chunkAt - 1); }
        return;
      }
      if (e.key === "/" && !typing && !$("#key-dialog").open) { e.preventDefault(); $("#q").focus(); $("#q").select(); return; }
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        const hits = [...document.querySelectorAll(".hit")];
        if (!hits.length) return;
        const at = hits.indexOf(document.activeElement);
        if (at < 0 && document.activeElement !== $("#q")) return;
        e.preventDefault();
        const next = e.key === "ArrowDown" ? Math.min(at + 1, hits.length - 1) : at - 1;
        if (next < 0) $("#q").focus(); else hits[next].focus();
      }
    });
  }

  wire();
  start();
})();
