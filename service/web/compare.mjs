// The Compare tab: two or more requests side by side (POST /v1/comparisons), each column headed by its layout.
import {$, el, gib, number, percent, pretty, seconds, setStatus} from "./dom.mjs";
import {api, pictureBlob} from "./api.mjs";
import {EXAMPLES, exampleSelect} from "./examples.mjs";
import {fillPicture, pictureSlot} from "./pictures.mjs";
import {showError} from "./result.mjs";

// Layout fields the summary already writes ("DP 8 x TP 4 x PP 2, mb 1, 1f1b v5, ZeRO 1, recompute full, SP").
const IN_SUMMARY = new Set(["dp", "tp", "pp", "cp", "microbatch_size", "schedule", "virtual_stages", "zero_stage",
  "recompute", "sequence_parallel"]);
const SHOWN_DIFFERENCES = 3;

// Every leaf of a request document as "path" -> value (lists whole, as JSON).
function leaves(doc, prefix = "", out = new Map()) {
  for (const [key, value] of Object.entries(doc || {})) {
    const path = prefix + key;
    if (value !== null && typeof value === "object" && !Array.isArray(value)) leaves(value, `${path}.`, out);
    else out.set(path, JSON.stringify(value));
  }
  return out;
}

// A leaf's value as a heading writes it: a string as itself, anything else as JSON.
const shown = (json) => (typeof JSON.parse(json) === "string" ? JSON.parse(json) : json);

// The headings of a comparison's columns, one per row of the answer: `shape` (the layout's "DP 8 x TP 4 x PP 2"),
// `detail` (the rest of its summary), `differs` (the request's fields that are not the same in every request, and
// that the summary does not write: the model, the global batch, ...; "layout." left out) and the `label` the user
// typed, "" when none. `requests` are the documents compared, in the rows' order.
export function columnHeadings(rows, requests, labels) {
  const all = requests.map((doc) => leaves(doc));
  const paths = [...new Set(all.flatMap((m) => [...m.keys()]))].filter((path) =>
    !(path.startsWith("layout.") && IN_SUMMARY.has(path.slice(7))) && new Set(all.map((m) => m.get(path))).size > 1);
  return rows.map((row, i) => {
    const [shape, ...rest] = row.summary.split(", ");
    const differs = paths.filter((path) => all[i].has(path)).slice(0, SHOWN_DIFFERENCES)
      .map((path) => `${path.replace(/^layout\./, "")} ${shown(all[i].get(path))}`);
    return {shape, detail: rest.join(", "), differs: differs.join(", "), label: (labels && labels[i]) || ""};
  });
}

// A column's name in one line (the pictures' captions): the label, else the layout's shape and what differs.
export function columnName(heading) {
  return heading.label || heading.shape + (heading.differs ? ` (${heading.differs})` : "");
}

let editors = 0;

export function addCompareEditor(example) {
  editors += 1;
  const select = exampleSelect();
  const textarea = el("textarea", {class: "compare-request", spellcheck: "false", "aria-label": `request ${editors}`});
  textarea.value = pretty(EXAMPLES[example].request);
  select.value = String(example);
  select.addEventListener("change", () => { textarea.value = pretty(EXAMPLES[Number(select.value)].request); });
  const label = el("input", {class: "compare-label", placeholder: "label (optional)", "aria-label": `label ${editors}`});
  $("#compare-editors").append(el("div", {class: "panel compare-editor"},
    el("div", {class: "panel-head"}, label, select), textarea));
}

const METRICS = [
  ["iteration time", (r) => seconds(r.iteration_time_s)],
  ["tokens/s", (r) => number(r.tokens_per_s)],
  ["MFU", (r) => percent(r.mfu)],
  ["bubble fraction", (r) => percent(r.bubble_fraction)],
  ["stage imbalance", (r) => number(r.stage_imbalance, 3)],
  ["exposed TP comm.", (r) => seconds(r.exposed_communication_s.tp)],
  ["exposed PP comm.", (r) => seconds(r.exposed_communication_s.pp)],
  ["exposed DP comm.", (r) => seconds(r.exposed_communication_s.dp)],
  ["peak memory", (r) => `${gib(r.memory.peak_gib_per_gpu)} of ${number(r.memory.capacity_gib)}`],
];

function headingCell(heading, best) {
  return el("th", {class: best ? "best" : null, "data-shape": heading.shape},
    heading.label ? el("div", {class: "col-label", text: heading.label}) : null,
    el("div", {class: "col-shape", text: heading.shape}),
    el("div", {class: "col-detail", text: heading.detail}),
    heading.differs ? el("div", {class: "col-differs", text: heading.differs}) : null);
}

export async function runCompare() {
  const status = $("#compare-status");
  const container = $("#compare-result");
  const panels = [...document.querySelectorAll(".compare-editor")];
  const texts = panels.map((p) => $(".compare-request", p).value);
  const typed = panels.map((p) => $(".compare-label", p).value.trim());
  setStatus(status, "running", `simulating ${texts.length} requests…`);
  try {
    const requests = texts.map((text) => {
      try { return JSON.parse(text); } catch (_) { throw new Error("each request of a comparison is JSON here"); }
    });
    const labels = typed.map((label, i) => label || `request ${i + 1}`);  // the API's labels must all be given
    const answer = await api("POST", "/v1/comparisons", JSON.stringify({requests, labels}));
    setStatus(status, "succeeded", "done");
    const rows = answer.rows;
    const headings = columnHeadings(rows, requests, typed);
    const best = Math.max(...rows.map((r) => r.tokens_per_s));
    const table = el("table", {class: "grid compare-table", "data-table": "comparison"},
      el("thead", {}, el("tr", {}, el("th", {text: "figure"}),
        rows.map((r, i) => headingCell(headings[i], r.tokens_per_s === best)))),
      el("tbody", {}, METRICS.map(([name, get]) => el("tr", {}, el("td", {text: name}),
        rows.map((r) => el("td", {class: "num", text: get(r), "data-label": r.label}))))));
    const names = headings.map(columnName);
    const slots = rows.map((r, i) => pictureSlot("timeline", `${names[i]}: pipeline timeline`));
    const breakdowns = rows.map((r, i) => pictureSlot("breakdown", `${names[i]}: where the time goes`));
    container.replaceChildren(el("h2", {text: "Comparison"}), table,
      el("div", {class: "pictures-row"}, breakdowns.map((s) => s.figure)), ...slots.map((s) => s.figure));
    const draw = (kind, i) => (onWait) => pictureBlob("POST", `/v1/plots?kind=${kind}`, texts[i], onWait);
    await Promise.all([...slots.map((slot, i) => fillPicture(slot, draw("timeline", i))),
      ...breakdowns.map((slot, i) => fillPicture(slot, draw("breakdown", i)))]);
  } catch (err) {
    setStatus(status, "failed", "failed");
    showError(container, err);
  }
}
