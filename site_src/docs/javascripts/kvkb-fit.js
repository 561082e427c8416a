// The "Will it fit?" calculator: the inputs become `kvkb fit` arguments, the worker runs the
// CLI's own argparse + run() in Python, and this file draws the JSON it prints.
import { KvkbPython, el } from "./kvkb-client.js";

const $ = (id) => document.getElementById(id);
const form = $("kvkb-fit-form"), result = $("kvkb-fit-result"), status = $("kvkb-fit-status");
const model = $("kvkb-fit-model"), config = $("kvkb-fit-config"), gpu = $("kvkb-fit-gpu"), gpuMem = $("kvkb-fit-gpu-memory");
const util = $("kvkb-fit-util"), maxLen = $("kvkb-fit-max-model-len"), tp = $("kvkb-fit-tp");
const kvDtype = $("kvkb-fit-kv-dtype"), block = $("kvkb-fit-block-size"), run = $("kvkb-fit-run");
const draft = $("kvkb-fit-draft-layers");
const PASTE = "__paste__";
const opened = performance.now();

function setState(state, message) {
  result.dataset.state = state;
  if (message !== undefined) status.textContent = message;
  run.disabled = state === "loading" || state === "working";
}

const python = new KvkbPython(async (err) => {
  if (err) return setState("error", `Python could not start in this browser: ${err.message}`);
  const { value } = await python.call("choices");
  model.replaceChildren(...value.models.map((m) => el("option", { value: m, text: m })),
    el("option", { value: PASTE, text: "Paste a config.json…" }));
  model.value = value.models.includes("meta-llama/Llama-3.1-8B-Instruct") ? "meta-llama/Llama-3.1-8B-Instruct" : value.models[0];
  gpu.replaceChildren(...value.gpus.map(([label, gib]) => el("option", { value: `${gib}GiB`, text: `${label}: ${gib} GiB` })),
    el("option", { value: "", text: "Other (type the size)" }));
  gpu.value = "79.18GiB";
  gpuMem.value = gpu.value;
  kvDtype.replaceChildren(...value.kv_cache_dtypes.map((d) => el("option", { value: d, text: d })));
  result.dataset.readyMs = String(Math.round(performance.now() - opened));
  setState("ready", "Ready.");
  compute();
});

// The arguments as a user would type them after `kvkb fit` (the model first, --json added by Python).
export function argv() {
  const args = model.value === PASTE ? [] : [model.value];
  const opt = (flag, value) => { if (String(value).trim() !== "") args.push(flag, String(value).trim()); };
  opt("--gpu-memory", gpuMem.value);
  opt("--gpu-memory-utilization", util.value);
  opt("--max-model-len", maxLen.value);
  opt("--tensor-parallel-size", tp.value);
  if (kvDtype.value && kvDtype.value !== "auto") opt("--kv-cache-dtype", kvDtype.value);
  opt("--block-size", block.value);
  if (Number(draft.value) > 0) opt("--draft-layers", draft.value);
  return args;
}

async function compute() {
  if (result.dataset.state === "loading") return;
  const args = argv();
  const pasted = model.value === PASTE ? config.value : null;
  result.dataset.argv = JSON.stringify(args);
  setState("working", "Computing…");
  try {
    const { value, ms } = await python.call("fit", args, pasted);
    result.dataset.ms = String(ms);
    show(value, args, pasted !== null);
    setState("done", value.rc === 2 ? "Check the inputs." : `Computed in ${ms} ms.`);
  } catch (err) {
    result.replaceChildren(el("p", { class: "kvkb-error", text: `kvkb fit failed: ${err.message}` }));
    setState("error", "kvkb fit failed.");
  }
}

let timer = null;
form.addEventListener("input", (e) => {
  if (e.target === gpu) gpuMem.value = gpu.value;
  if (e.target === gpuMem) gpu.value = [...gpu.options].some((o) => o.value === gpuMem.value) ? gpuMem.value : "";
  $("kvkb-fit-config-label").hidden = model.value !== PASTE;
  clearTimeout(timer);
  timer = setTimeout(compute, 250);
});
form.addEventListener("submit", (e) => { e.preventDefault(); clearTimeout(timer); compute(); });

const GiB = 1024 ** 3;
const gib = (n) => `${(n / GiB).toFixed(2)} GiB`;
const num = (n) => Number(n).toLocaleString("en-US");

function show(out, args, pasted) {
  const command = `kvkb fit ${pasted ? "config.json " : ""}${args.map((a) => (/\s/.test(a) ? `'${a}'` : a)).join(" ")} --json`;
  const parts = [el("p", {}, "Same as ", el("code", { id: "kvkb-fit-command", text: command }))];
  if (out.rc === 2 || !out.stdout) {
    result.dataset.fits = "";
    parts.push(el("p", { class: "kvkb-error", text: (out.stderr || "no answer").trim() }));
    result.replaceChildren(...parts);
    return;
  }
  const r = JSON.parse(out.stdout);
  result.dataset.fits = String(r.fits);
  const verdict = r.fits === true ? "Fits" : r.fits === false ? "Does not fit" : "May fit (depends on the estimate's range)";
  parts.push(el("p", { class: `kvkb-verdict kvkb-fits-${r.fits}` }, el("strong", { text: verdict }),
    ` — ${r.model}, max_model_len ${num(r.max_model_len)}, KV ${r.kv_cache_dtype}, block ${r.block_size}, TP ${r.tensor_parallel_size}`));
  const facts = el("ul", { class: "kvkb-fit-facts" });
  facts.append(el("li", {}, `KV cache per token: ${num(r.bytes_per_token)} B (`, el("code", { text: r.bytes_per_token_formula || "" }), ")"));
  if (r.kv_tokens != null) facts.append(el("li", { text: `KV-cache tokens: ${num(r.kv_tokens)}${r.kv_tokens_range ? ` (range ${num(r.kv_tokens_range[0])} – ${num(r.kv_tokens_range[1])})` : ""}` }));
  if (r.max_concurrency != null) facts.append(el("li", { text: `Requests of max_model_len at once: ${r.max_concurrency}x` }));
  if (r.max_model_len_that_fits != null) facts.append(el("li", { text: `Longest max_model_len that starts: ${num(r.max_model_len_that_fits)}` }));
  if (r.capacity_line) facts.append(el("li", {}, "vLLM would print: ", el("code", { text: r.capacity_line })));
  if (r.error_line) facts.append(el("li", {}, "vLLM would fail with: ", el("code", { text: r.error_line })));
  parts.push(facts);
  if (r.budget && r.budget.gpu_memory) parts.push(budgetBar(r.budget));
  for (const s of r.suggestions || []) parts.push(el("p", { class: "kvkb-note", text: s }));
  for (const n of r.notes || []) parts.push(el("p", { class: "kvkb-note", text: n }));
  parts.push(el("details", { class: "kvkb-raw" }, el("summary", { text: "The JSON (what kvkb fit --json prints)" }),
    el("pre", {}, el("code", { id: "kvkb-fit-json", text: out.stdout }))));
  result.replaceChildren(...parts);
}

// The fit page's stacked bar (kvkb.fit.sitepage.budget_svg), drawn for these inputs.
function budgetBar(b) {
  const NS = "http://www.w3.org/2000/svg";
  const svg = (tag, attrs, text) => {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const total = b.gpu_memory;
  const segments = [
    ["weights", b.weights, "#5b8def"],
    ["activations, CUDA graphs, non-torch (high estimate)", b.requested - b.weights - b.kv_low, "#f0a35e"],
    ["KV cache", b.kv_low, "#4caf7d"],
    [`kept free (1 - ${Number(b.utilization).toFixed(2)})`, total - b.requested, "#c9ced6"],
  ];
  const width = 640, height = 84 + 20 * segments.length;
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img", id: "kvkb-fit-bar", "aria-label": "Where this GPU's memory goes" });
  root.append(svg("text", { x: 0, y: 18, "font-size": 14, "font-weight": "bold", fill: "currentColor" }, `Where ${gib(total)} goes`));
  let x = 0;
  segments.forEach(([label, size, color], i) => {
    const w = (width * Math.max(size, 0)) / total;
    root.append(svg("rect", { x: x.toFixed(1), y: 28, width: w.toFixed(1), height: 34, fill: color, "data-part": label.split(" ")[0] }));
    x += w;
    const ly = 84 + 20 * i;
    root.append(svg("rect", { x: 0, y: ly - 11, width: 12, height: 12, fill: color }));
    root.append(svg("text", { x: 18, y: ly, "font-size": 13, fill: "currentColor" }, `${label}: ${gib(Math.max(size, 0))}`));
  });
  return root;
}
