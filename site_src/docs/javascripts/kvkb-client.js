// The page side of kvkb-worker.js: start it at once, ask it things, and cancel long work by
// terminating it (Python in a worker cannot be interrupted) and starting a fresh one.
export class KvkbPython {
  constructor(onReady) {
    this.onReady = onReady;
    this.start();
  }

  start() {
    this.worker = new Worker(new URL("./kvkb-worker.js", import.meta.url), { type: "module" });
    this.pending = new Map();
    this.next = 1;
    this.ready = new Promise((resolve, reject) => this.pending.set(0, { resolve, reject }));
    this.worker.onmessage = (event) => {
      const { id, ok, value, error, ms } = event.data;
      const waiter = this.pending.get(id);
      if (!waiter) return;
      this.pending.delete(id);
      ok ? waiter.resolve(id === 0 ? value : { value, ms }) : waiter.reject(new Error(error));
    };
    this.worker.onerror = (event) => {
      event.preventDefault();
      const err = new Error(event.message || "the Python worker could not start");
      for (const waiter of this.pending.values()) waiter.reject(err);
      this.pending.clear();
    };
    this.ready.then((info) => this.onReady && this.onReady(null, info), (err) => this.onReady && this.onReady(err));
  }

  call(op, ...args) {
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, op, args });
    });
  }

  cancel() {
    this.worker.terminate();
    const err = new Error("cancelled");
    err.cancelled = true;
    for (const waiter of this.pending.values()) waiter.reject(err);
    this.start();
  }
}

// Build DOM from data: text always goes through textContent, never innerHTML.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key === "href") node.setAttribute("href", safeHref(value));
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Only http(s) links, and relative ones: a javascript: URL from data never becomes a link.
export function safeHref(url) {
  try {
    const parsed = new URL(url, document.baseURI);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : "#";
  } catch {
    return "#";
  }
}
