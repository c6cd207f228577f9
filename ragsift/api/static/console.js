// ragsift console: reads /console/events (server-sent events over fetch, so the API key
// travels in a header, never in a URL) and posts questions to /v1/query.
// Every piece of data is put in the page with textContent: query text is untrusted.
"use strict";

const KEY_STORE = "ragsift.console.key"; // sessionStorage: gone when the tab closes
const MAX_CARDS = 100; // the page keeps the latest cards only
const MAX_EVIDENCE = 200;
const RECONNECT_MS = 2000;
// C6: what each badge colour tells the reader
const BADGE_LABEL = { green: "confident", orange: "check sources", red: "advisory only" };

const cards = new Map(); // query id -> card element
let stream = null; // AbortController of the open event stream

function headers(extra) {
  const h = Object.assign({}, extra || {});
  const key = sessionStorage.getItem(KEY_STORE);
  if (key) h["X-API-Key"] = key;
  return h;
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function pct(x) {
  return typeof x === "number" ? Math.round(100 * x) + "%" : "–";
}

function setConn(on, text) {
  const conn = document.getElementById("conn");
  conn.className = "conn " + (on ? "on" : "off");
  conn.dataset.state = on ? "on" : "off";
  conn.textContent = text;
}

function card(queryId) {
  let node = cards.get(queryId);
  if (node) return node;
  node = document.getElementById("card-template").content.firstElementChild.cloneNode(true);
  node.dataset.queryId = queryId;
  node.querySelector(".qid").textContent = queryId;
  const list = document.getElementById("results");
  const empty = list.querySelector(".empty");
  if (empty) empty.remove();
  list.insertBefore(node, list.querySelector(".card"));
  cards.set(queryId, node);
  if (cards.size > MAX_CARDS) {
    const [oldest] = cards.keys();
    cards.get(oldest).remove();
    cards.delete(oldest);
  }
  return node;
}

function setBadge(node, badge) {
  const b = node.querySelector(".badge");
  b.dataset.badge = badge;
  b.textContent = BADGE_LABEL[badge] || badge;
  node.dataset.badge = badge;
}

function showResult(node, r) {
  node.classList.remove("pending");
  if (r.outcome === "ok") offerLabel(node); // a greeting or a failure has no retrieval to label
  node.querySelector(".question").textContent = r.query;
  node.querySelector(".level").textContent = r.outcome === "ok" ? r.level : r.outcome;
  node.querySelector(".confidence").textContent =
    "confidence " + pct(r.confidence) + " (" + r.scorer + ")" + (r.cache_hit ? " · cached" : "");
  if (!node.dataset.badge) setBadge(node, r.advisory_only ? "red" : "orange");
  if (r.disclaimer) {
    const d = node.querySelector(".disclaimer");
    d.hidden = false;
    d.textContent = r.disclaimer;
  }
  if (!node.dataset.answered) {
    node.querySelector(".answer").textContent = r.error ? "retrieval failed: " + r.error
      : (r.answer_hint || "waiting for the report…");
  }
  const kept = node.querySelector(".kept ol");
  kept.replaceChildren();
  for (const h of r.hits) {
    const li = el("li");
    li.append(el("span", h.score.toFixed(2), "score"), " ", el("b", h.source), " — ", el("span", h.text));
    kept.append(li);
  }
  node.querySelector(".kept summary").textContent = "kept " + r.hits.length + " of " + r.total_found;
  const dropped = node.querySelector(".dropped ul");
  dropped.replaceChildren();
  for (const d of r.dropped) {
    const bar = d.threshold !== null && d.threshold !== undefined ? " < " + d.threshold.toFixed(2)
      : d.limit !== null && d.limit !== undefined ? " (limit " + d.limit + ")" : "";
    const li = el("li");
    li.append(el("span", d.chunk_id), " ", el("span", d.rule, "reason"), " ",
      el("span", d.value.toFixed(2) + bar, "score"));
    dropped.append(li);
  }
  node.querySelector(".dropped summary").textContent = "dropped " + r.dropped.length;
  const advice = node.querySelector(".advice");
  advice.replaceChildren(...r.recommendations.map((a) => el("li", a.code + ": " + a.message)));
}

function showReport(node, rep) {
  node.classList.remove("pending");
  node.dataset.answered = "1";
  setBadge(node, rep.badge);
  node.classList.toggle("refusal", rep.is_refusal);
  node.querySelector(".level").textContent = rep.level;
  const answer = node.querySelector(".answer");
  answer.textContent = rep.answer;
  if (rep.citations.length) answer.append(el("div", "sources: " + rep.citations.join(", "), "dim"));
  const banner = node.querySelector(".banner");
  banner.hidden = !rep.banner;
  banner.textContent = rep.banner || "";
  if (rep.disclaimer) {
    const d = node.querySelector(".disclaimer");
    d.hidden = false;
    d.textContent = rep.disclaimer;
  }
}

// A label on a result (POST /v1/feedback). Only a card the label sample chose
// (RAGSIFT_FEEDBACK_SAMPLE_SHARE, its decision flagged SAMPLED_FOR_LABEL) sends a
// sampled label; any other card was picked by whoever looked at it, so its label is
// sent as reported: kept, never re-fit on (docs/feedback.md).
function offerLabel(node) {
  const box = node.querySelector(".label");
  if (box.dataset.ready) return;
  box.dataset.ready = "1";
  box.hidden = false;
  for (const button of box.querySelectorAll("button")) {
    button.addEventListener("click", () => sendLabel(node, button.dataset.relevant === "true"));
  }
}

async function sendLabel(node, relevant) {
  const status = node.querySelector(".label .status");
  const sampled = node.dataset.sampled === "1";
  const body = { query_id: node.dataset.queryId, relevant: relevant, sampled: sampled };
  if (node.dataset.tenant) body.tenant_id = node.dataset.tenant;
  const resp = await fetch("/v1/feedback", {
    method: "POST",
    headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify(body),
  });
  const answer = await resp.json().catch(() => ({}));
  status.dataset.state = resp.ok ? "ok" : "error";
  status.textContent = resp.ok
    ? "labelled " + (relevant ? "yes" : "no") + (sampled ? " (sampled)" : " (reported: never re-fit on)")
    : resp.status + ": " + (answer.detail || resp.statusText);
}

function showDecision(node, d) {
  if ((d.flags || []).includes("SAMPLED_FOR_LABEL")) node.dataset.sampled = "1";
  const p = node.querySelector(".decision");
  p.hidden = false;
  p.textContent = (d.use_context ? "use context" : "do not use context") + " — " + d.reason +
    (d.review_queue ? " · review: " + d.review_queue : "");
}

function showRejected(node, data, query) {
  node.classList.remove("pending");
  node.classList.add("rejected");
  setBadge(node, "rejected");
  if (query) node.querySelector(".question").textContent = query;
  node.querySelector(".level").textContent = "rejected at " + data.stage;
  node.querySelector(".answer").textContent = data.error;
}

function showCounters(counters) {
  const body = document.querySelector("#counters tbody");
  body.replaceChildren();
  for (const [tenant, c] of Object.entries(counters)) {
    const tr = el("tr");
    tr.dataset.tenant = tenant;
    tr.append(el("td", tenant), el("td", c.queries), el("td", pct(c.answer_rate)),
      el("td", pct(c.refusal_rate)), el("td", c.cache_hits));
    body.append(tr);
  }
}

function showEvidence(m) {
  const list = document.querySelector("#evidence ol");
  const li = el("li");
  const type = el("span", m.data.type, "type");
  type.dataset.type = m.data.type;
  li.append(type, " ", el("span", m.query_id, "dim"), el("div", m.data.summary));
  list.prepend(li);
  while (list.children.length > MAX_EVIDENCE) list.lastChild.remove();
}

function withTenant(node, tenant) {
  if (tenant) node.dataset.tenant = tenant;
  return node;
}

function handle(m) {
  switch (m.kind) {
    case "result": return showResult(withTenant(card(m.query_id), m.tenant_id), m.data);
    case "report": return showReport(card(m.query_id), m.data);
    case "decision": return showDecision(card(m.query_id), m.data);
    case "rejected": return m.query_id && showRejected(card(m.query_id), m.data);
    case "evidence": return showEvidence(m);
    case "counters": return showCounters(m.data);
  }
}

async function connect() {
  if (stream) stream.abort();
  const controller = new AbortController();
  stream = controller;
  try {
    const resp = await fetch("/console/events", { headers: headers(), signal: controller.signal });
    if (!resp.ok) {
      const body = await resp.json().catch(() => ({}));
      setConn(false, resp.status + ": " + (body.detail || resp.statusText));
      return; // a bad key does not get better by retrying: wait for a new one
    }
    setConn(true, "live");
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        for (const line of frame.split("\n")) {
          if (line.startsWith("data: ")) handle(JSON.parse(line.slice(6)));
        }
      }
    }
  } catch (err) {
    if (controller.signal.aborted) return;
  }
  if (stream === controller) {
    setConn(false, "reconnecting…");
    setTimeout(connect, RECONNECT_MS);
  }
}

async function ask(event) {
  event.preventDefault();
  const error = document.getElementById("query-error");
  error.hidden = true;
  const body = {
    query: document.getElementById("query").value,
    collection: document.getElementById("collection").value || "default",
    want_report: true,
  };
  const tenant = document.getElementById("tenant").value.trim();
  if (tenant) body.tenant_id = tenant;
  const resp = await fetch("/v1/query", {
    method: "POST",
    headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify(body),
  });
  const answer = await resp.json().catch(() => ({}));
  if (resp.ok) {
    // the stream shows it too; this makes the asker's own card appear even if it lags
    showResult(withTenant(card(answer.query_id), answer.result.tenant_id), answerView(answer.result));
    if (answer.report) {
      const citations = answer.report.citations.map((c) => c.source);
      showReport(card(answer.query_id), Object.assign({}, answer.report, { citations }));
    }
  } else if (answer.query_id && answer.error === "rejected") {
    showRejected(card(answer.query_id), { stage: "validate", error: answer.detail }, body.query);
  } else {
    error.hidden = false;
    const fields = (answer.fields || []).map((f) => f.loc.join(".") + ": " + f.msg).join("; ");
    error.textContent = (answer.detail || resp.statusText) + (fields ? " — " + fields : "");
  }
}

// The API answers with the full result; the card shows the console's view of it.
function answerView(r) {
  return {
    query: r.query, outcome: r.outcome, level: r.level, confidence: r.confidence,
    scorer: r.breakdown.scorer, cache_hit: r.cache.hit, advisory_only: r.advisory_only,
    disclaimer: r.disclaimer, answer_hint: r.answer_hint, total_found: r.total_found,
    error: r.error ? r.error.message : null,
    hits: r.hits.map((h) => ({ score: h.score, source: h.citation.source, text: h.text.slice(0, 400) })),
    dropped: r.dropped, recommendations: r.recommendations,
  };
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("key").value = sessionStorage.getItem(KEY_STORE) || "";
  document.getElementById("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const key = document.getElementById("key").value.trim();
    if (key) sessionStorage.setItem(KEY_STORE, key); else sessionStorage.removeItem(KEY_STORE);
    connect();
  });
  document.getElementById("query-form").addEventListener("submit", ask);
  connect();
});
