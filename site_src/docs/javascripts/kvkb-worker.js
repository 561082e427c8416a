// Module Web Worker: Pyodide (served by this site, assets/pyodide/) running kvkb's own Python.
// It holds no matching or sizing logic: it calls kvkb.site_src.webapi, which calls the functions
// `kbmatch --json` and `kvkb fit --json` print from. Messages: {id, op, args} -> {id, ok, value|error}.
import { loadPyodide } from "../assets/pyodide/pyodide.mjs";

const SITE = new URL("../", import.meta.url); // the site root, wherever the site is served
let api = null;

async function start() {
  const t0 = performance.now();
  const phases = {}; // where the start-up time goes, for the page's figures (data-phases)
  const mark = (name) => { phases[name] = Math.round(performance.now() - t0); };
  // no-cache: the small manifest is revalidated; the files it names carry their content hash
  const manifest = await (await fetch(new URL("assets/kvkb/manifest.json", SITE), { cache: "no-cache" })).json();
  const [py, zip, index] = await Promise.all([
    loadPyodide({ indexURL: new URL("assets/pyodide/", SITE).href, stdout: () => {}, stderr: () => {} }).then((p) => (mark("pyodide"), p)),
    fetch(new URL(`assets/kvkb/${manifest.python}`, SITE)).then((r) => r.arrayBuffer()),
    fetch(new URL(`assets/kvkb/${manifest.index}`, SITE)).then((r) => r.text()),
  ]);
  py.unpackArchive(new Uint8Array(zip), "zip", { extractDir: "/kvkb" });
  py.runPython("import sys; sys.path.insert(0, '/kvkb')");
  api = py.pyimport("kvkb.site_src.webapi");
  mark("import");
  // the index text goes to Python's json: some word masks exceed JavaScript's safe integers
  const entries = api.load(index, SITE.href);
  mark("index");
  return { ms: Math.round(performance.now() - t0), entries, pyodide: manifest.pyodide, phases };
}

function toJs(value) {
  return value && typeof value.toJs === "function" ? value.toJs({ dict_converter: Object.fromEntries }) : value;
}

const OPS = {
  diagnose: ([data]) => api.diagnose(data),
  choices: () => toJs(api.fit_choices()),
  fit: ([argv, config]) => toJs(api.fit(argv, typeof config === "string" ? config : undefined)), // JS null is not None
};

const ready = start();
ready.then(
  (info) => postMessage({ id: 0, ok: true, value: info }),
  (err) => postMessage({ id: 0, ok: false, error: String(err && err.message ? err.message : err) }),
);

onmessage = async (event) => {
  const { id, op, args } = event.data;
  try {
    await ready;
    const t0 = performance.now();
    const value = OPS[op](args || []);
    postMessage({ id, ok: true, value, ms: Math.round(performance.now() - t0) });
  } catch (err) {
    postMessage({ id, ok: false, error: String(err && err.message ? err.message : err) });
  }
};
