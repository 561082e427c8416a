// The diagnose page: paste or drop a log, show what `kbmatch --json` says about it.
// All matching happens in Python (kvkb-worker.js); this file only draws the JSON it returns.
// Text from the paste or from entries is only ever set with textContent (el), never as HTML.
import { KvkbPython, el } from "./kvkb-client.js";

const $ = (id) => document.getElementById(id);
const paste = $("kvkb-paste"), button = $("kvkb-diagnose"), cancel = $("kvkb-cancel");
const result = $("kvkb-result"), status = $("kvkb-status"), drop = $("kvkb-drop"), fileInput = $("kvkb-file");
const opened = performance.now();
let droppedBytes = null; // a dropped file's raw bytes: decoded by Python's reader, as the CLI does

function setState(state, message) {
  result.dataset.state = state;
  if (message !== undefined) status.textContent = message;
  const busy = state === "loading" || state === "working";
  button.disabled = busy;
  cancel.style.display = busy ? "" : "none"; // md-button sets display, which beats [hidden]
}

const python = new KvkbPython((err, info) => {
  if (err) {
    setState("error", `Python could not start in this browser: ${err.message}`);
    return;
  }
  const ms = Math.round(performance.now() - opened);
  result.dataset.readyMs = String(ms);
  result.dataset.phases = JSON.stringify(info.phases);
  setState("ready", `Ready: kbmatch with ${info.entries} entries, Python loaded in ${(ms / 1000).toFixed(1)} s.`);
});

async function diagnose(data, label) {
  setState("working", `Matching ${label}…`);
  result.dataset.rootCause = "";
  result.replaceChildren();
  const t0 = performance.now();
  try {
    const { value } = await python.call("diagnose", data);
    const ms = Math.round(performance.now() - t0);
    result.dataset.ms = String(ms);
    show(JSON.parse(value), value);
    setState("done", `Answered in ${ms} ms.`);
  } catch (err) {
    if (err.cancelled) {
      setState("loading", "Cancelled. Restarting Python…");
      python.ready.then(() => setState("ready", "Ready."), () => setState("error", "Python could not restart."));
      return;
    }
    result.replaceChildren(el("p", { class: "kvkb-error", text: `kbmatch failed: ${err.message}` }));
    setState("error", "kbmatch failed on this input.");
  }
}

button.addEventListener("click", () => {
  if (droppedBytes && paste.dataset.fromFile === "1") diagnose(droppedBytes.bytes, droppedBytes.name);
  else diagnose(paste.value, "the pasted log");
});
cancel.addEventListener("click", () => python.cancel());
paste.addEventListener("input", () => {
  paste.dataset.fromFile = "0";
  droppedBytes = null;
  $("kvkb-file-name").textContent = "";
});

async function takeFile(file) {
  if (!file) return;
  const bytes = new Uint8Array(await file.arrayBuffer());
  droppedBytes = { bytes, name: file.name };
  // shown for reading only (lossy for non-UTF-8); what is matched is the bytes themselves
  paste.value = new TextDecoder("utf-8", { fatal: false }).decode(bytes.subarray(0, 200000));
  paste.dataset.fromFile = "1";
  $("kvkb-file-name").textContent = `${file.name} (${bytes.length.toLocaleString()} bytes)`;
  await python.ready.catch(() => {});
  diagnose(bytes, file.name);
}
fileInput.addEventListener("change", () => takeFile(fileInput.files[0]));
for (const target of [drop, paste]) {
  target.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("kvkb-drop-over"); });
  target.addEventListener("dragleave", () => drop.classList.remove("kvkb-drop-over"));
  target.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("kvkb-drop-over");
    takeFile(e.dataTransfer.files[0]);
  });
}

// --- drawing the JSON ----------------------------------------------------------------------------

const TIERS = { confident: "Confident", likely: "Likely", possible: "Possible" };

function tier(match) {
  // older matchers have only the boolean; newer ones name the tier
  return match.confidence || (match.confident ? "confident" : "possible");
}

function show(report, rawJson) {
  const parts = [];
  const root = report.root_cause || "";
  result.dataset.rootCause = root;
  const rootMatch = (report.matches || []).find((m) => m.id === root);
  if (rootMatch) {
    parts.push(el("p", { class: "kvkb-verdict kvkb-verdict-confident" }, "Root cause: ",
      el("a", { href: rootMatch.url }, el("strong", { text: rootMatch.id })), " ", rootMatch.title || ""));
  } else if ((report.matches || []).length) {
    parts.push(el("p", { class: "kvkb-verdict" }, "No confident root cause; the closest entries are below."));
  } else {
    parts.push(el("p", { class: "kvkb-verdict" }, "No entry in the knowledge base matches this log."));
  }
  if (report.not_memory) {
    const nm = report.not_memory;
    parts.push(el("div", { class: "admonition warning kvkb-not-memory" },
      el("p", { class: "admonition-title", text: "The visible root cause is not a memory error" }),
      el("p", {}, nm.line ? `Line ${nm.line}: ` : "", nm.type ? `${nm.type}: ` : ""), el("pre", {}, el("code", { text: nm.text || "" }))));
  }
  if (report.truncated) {
    parts.push(el("div", { class: "admonition warning kvkb-truncated" },
      el("p", { class: "admonition-title", text: "The paste ends before the exception" }),
      el("p", { text: "Paste the rest of the log (the traceback's last lines name the error)." })));
  } else if (report.no_error && !report.root_cause) {
    const ne = report.no_error;
    parts.push(el("div", { class: "admonition warning kvkb-no-error" },
      el("p", { class: "admonition-title", text: "No error in this paste" }),
      el("p", { text: `No exception, traceback or ERROR line. It ends at ${ne.line ? "line " + ne.line : "its last line"}:` }),
      el("pre", {}, el("code", { text: ne.text || "" })),
      el("p", { text: "Paste the lines that came after it, down to the last line of the traceback (it names the error)." })));
  }
  if (report.reached && !report.root_cause) {
    parts.push(el("p", { class: "kvkb-note kvkb-reached", text: `The log's last start-up had reached: ${report.reached}.` }));
  }
  if (typeof report.restarts === "number" && report.restarts > 0) {
    parts.push(el("p", { class: "kvkb-note kvkb-restarts", text: `The log holds ${report.restarts + 1} startups (${report.restarts} restart${report.restarts > 1 ? "s" : ""}); the answer is about the last one.` }));
  }
  if (report.first_error) {
    parts.push(el("p", { class: "kvkb-note kvkb-first-error" }, "First error in the log: ", el("code", { text: report.first_error })));
  }
  for (const m of report.matches || []) parts.push(matchCard(m));
  if (!root && report.new_issue_url) {
    parts.push(el("p", { class: "kvkb-new-issue" }, "Not in the knowledge base yet? ",
      el("a", { href: report.new_issue_url, class: "md-button", rel: "noopener" }, "Open a new-entry issue (prefilled)")));
  }
  parts.push(el("details", { class: "kvkb-raw" }, el("summary", { text: "The JSON (what kbmatch --json prints)" }),
    el("pre", {}, el("code", { id: "kvkb-json", text: rawJson }))));
  result.replaceChildren(...parts);
}

function matchCard(m) {
  const t = tier(m);
  const card = el("section", { class: `kvkb-match kvkb-tier-${t}`, "data-id": m.id, "data-confidence": t });
  card.append(el("h3", {}, el("span", { class: `kvkb-badge kvkb-tier-badge`, text: TIERS[t] || t }), " ",
    el("a", { href: m.url, text: m.id })));
  if (m.title) card.append(el("p", { class: "kvkb-match-title", text: m.title }));
  // no fix shown where the CLI shows none (a wrapper under its root cause, a possible match)
  const forms = m.fix_forms && Object.keys(m.fix_forms).length ? m.fix_forms : { cli: m.fix };
  if (Object.values(forms).some((text) => text)) {
    card.append(el("p", {}, el("strong", { text: "Fix: " }), m.fix_title || ""));
    for (const [kind, text] of Object.entries(forms)) {
      if (!text) continue;
      card.append(el("div", { class: "kvkb-fix-form" }, el("span", { class: "kvkb-form-label", text: kind }),
        el("pre", {}, el("code", { text }))));
    }
  }
  const notes = m.notes && typeof m.notes === "object" ? Object.entries(m.notes) : [];
  if (notes.length) card.append(el("ul", { class: "kvkb-notes" }, notes.map(([k, v]) => el("li", {}, el("code", { text: k }), ": ", String(v)))));
  const why = el("ul", { class: "kvkb-why" });
  const where = m.line_no ? `line ${m.line_no}` : m.offset != null ? `byte ${m.offset}` : "the log";
  const sig = m.signature || {};
  why.append(el("li", {}, `${where} matches signature `, el("code", { text: sig.id || "?" }),
    ` (vLLM ${sig.versions || "any"}, ${sig.engine || "?"} engine, ${sig.backend || "?"} backend), score ${m.score}`));
  if (m.runner_up) why.append(el("li", { text: `runner-up: ${m.runner_up.id} (${m.runner_up.signature}) ${m.runner_up.score}` }));
  if (m.stage) why.append(el("li", { text: `stage seen in the log: ${m.stage}` }));
  const params = m.params && typeof m.params === "object" ? Object.entries(m.params) : [];
  if (params.length) why.append(el("li", {}, "values read from your log: ", params.map(([k, v], i) => [i ? ", " : "", el("code", { text: `${k}=${v}` })])));
  card.append(el("p", { class: "kvkb-why-title", text: "Why it matched" }), why);
  if (Array.isArray(m.evidence) && m.evidence.length) {
    card.append(el("p", { class: "kvkb-why-title", text: "Evidence" }), el("ul", { class: "kvkb-evidence" },
      m.evidence.map((ev) => el("li", {}, ev.line ? `line ${ev.line}: ` : "", el("code", { text: ev.text || "" }), ev.says ? ` — ${ev.says}` : ""))));
  }
  card.append(el("p", {}, el("a", { href: m.url, text: "Read the entry: causes, fixes, and what the reproduction showed" })));
  return card;
}
