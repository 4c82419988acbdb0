// The page's small helpers: building elements, writing figures with their units, status lines and progress bars.
// Like every module of the page but app.js, it touches no page element when imported (Node imports it in tests).

export const $ = (selector, root = document) => root.querySelector(selector);

// An element with attributes ("class", "text", "on<event>" handlers, the rest as attributes) and children.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export const pretty = (value) => JSON.stringify(value, null, 2);
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const missing = (x) => x === null || x === undefined;

export function seconds(s) {
  if (missing(s)) return "–";
  if (s >= 86400) return `${(s / 86400).toPrecision(3)} d`;
  if (s >= 1) return `${s.toPrecision(4)} s`;
  if (s >= 1e-3) return `${(s * 1e3).toPrecision(4)} ms`;
  return `${(s * 1e6).toPrecision(3)} µs`;
}

export const percent = (x) => (missing(x) ? "–" : `${(100 * x).toFixed(1)}%`);
export const number = (x, digits = 0) => (missing(x) ? "–"
  : x.toLocaleString("en-US", {maximumFractionDigits: digits, minimumFractionDigits: digits}));
export const gib = (x) => (missing(x) ? "–" : `${x.toFixed(1)} GiB`);

// A job's status as words: "timed_out" -> "timed out".
export const stateText = (status) => String(status).replace(/_/g, " ");

export function setStatus(node, state, text) {
  node.dataset.state = state;
  node.textContent = text;
}

// A progress bar at `fraction` (0 to 1) with a label; null hides it.
export function setProgress(node, fraction, text) {
  node.hidden = fraction === null;
  if (fraction === null) return;
  $(".fill", node).style.width = `${Math.round(100 * fraction)}%`;
  $(".label", node).textContent = text;
  node.dataset.value = String(fraction);
}
