// clustersim's web page: plain JavaScript on the service's own API (no build step, no library).
// Every call goes through api(): the token, when one is typed, is kept for this browser session
// (sessionStorage) and sent as "Authorization: Bearer <token>".
"use strict";

const EXAMPLES = [
  {
    name: "GPT-3 13B on 64 A100: PP 8, m = 8 (a large bubble)",
    request: {
      model: {preset: "gpt3-13b"}, cluster: {preset: "dgx-a100", num_nodes: 8},
      layout: {dp: 1, tp: 8, pp: 8, microbatch_size: 1, global_batch_size: 8, schedule: "1f1b", recompute: "full"},
    },
  },
  {
    name: "GPT-3 13B on 64 A100: PP 8, m = 64 (the bubble shrinks)",
    request: {
      model: {preset: "gpt3-13b"}, cluster: {preset: "dgx-a100", num_nodes: 8},
      layout: {dp: 1, tp: 8, pp: 8, microbatch_size: 1, global_batch_size: 64, schedule: "1f1b", recompute: "full"},
    },
  },
  {
    name: "GPT-3 13B on 64 A100: interleaved 1F1B, v = 5",
    request: {
      model: {preset: "gpt3-13b"}, cluster: {preset: "dgx-a100", num_nodes: 8},
      layout: {dp: 1, tp: 8, pp: 8, microbatch_size: 1, global_batch_size: 64, schedule: "interleaved_1f1b",
               virtual_stages: 5, recompute: "full"},
    },
  },
  {
    name: "GPT-100B on 1024 A100: DP 128 x TP 4 x PP 2",
    request: {
      model: {preset: "gpt-100b"}, cluster: {preset: "dgx-a100", num_nodes: 128},
      layout: {dp: 128, tp: 4, pp: 2, microbatch_size: 1, global_batch_size: 1536, recompute: "selective",
               zero_stage: 1, sequence_parallel: true, overlap_grad_reduce: true},
    },
  },
  {
    name: "T5-100B on 1024 A100: DP 32 x TP 4 x PP 8, balanced stages",
    request: {
      model: {preset: "t5-100b"}, cluster: {preset: "dgx-a100", num_nodes: 128},
      layout: {dp: 32, tp: 4, pp: 8, microbatch_size: 1, global_batch_size: 1536, recompute: "selective",
               zero_stage: 1, sequence_parallel: true, overlap_grad_reduce: true, pipeline_partition: "balanced"},
    },
  },
  {
    name: "GPT 1T on 3072 A100 (Narayanan et al. 2021): run as a job",
    request: {
      model: {preset: "gpt-1t"}, cluster: {preset: "dgx-a100", num_nodes: 384},
      layout: {dp: 6, tp: 8, pp: 64, microbatch_size: 1, global_batch_size: 3072, schedule: "1f1b",
               recompute: "full"},
    },
  },
];

const SEARCH_EXAMPLE = {
  model: {preset: "gpt3-13b"},
  cluster: {preset: "dgx-a100", num_nodes: 8},
  global_batch_size: 512,
  space: {tp: [4, 8], recompute: ["selective", "full"]},
  bounds: {top_k: 5, max_candidates: 40},
};

const KINDS = ["timeline", "breakdown", "memory"];
const KIND_TITLES = {timeline: "Pipeline timeline", breakdown: "Where the time goes", memory: "Memory per stage"};
const TOKEN_KEY = "clustersim.token";

// ---- helpers ------------------------------------------------------------------------------------------------
const $ = (selector, root = document) => root.querySelector(selector);

function el(tag, attrs = {}, ...children) {
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

const pretty = (value) => JSON.stringify(value, null, 2);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function seconds(s) {
  if (s === null || s === undefined) return "–";
  if (s >= 86400) return `${(s / 86400).toPrecision(3)} d`;
  if (s >= 1) return `${s.toPrecision(4)} s`;
  if (s >= 1e-3) return `${(s * 1e3).toPrecision(4)} ms`;
  return `${(s * 1e6).toPrecision(3)} µs`;
}
const percent = (x) => (x === null || x === undefined ? "–" : `${(100 * x).toFixed(1)}%`);
const number = (x, digits = 0) => (x === null || x === undefined ? "–"
  : x.toLocaleString("en-US", {maximumFractionDigits: digits, minimumFractionDigits: digits}));
const gib = (x) => `${x.toFixed(1)} GiB`;

// ---- the API --------------------------------------------------------------------------------------------------
class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    const details = (error.details || []).map((d) => `${d.field}: ${d.rule}`);
    super(`${status} ${error.code || ""}: ${error.message || "request failed"}` +
          (details.length ? ` (${details.join("; ")})` : ""));
    this.status = status;
    this.body = body;
  }
}

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

function authHeaders() {
  const t = token();
  return t ? {Authorization: `Bearer ${t}`} : {};
}

// A request's text as a body: JSON when it parses as JSON, YAML otherwise (the API reads both).
function bodyOf(text) {
  try {
    JSON.parse(text);
    return {body: text, type: "application/json"};
  } catch (_) {
    return {body: text, type: "application/yaml"};
  }
}

async function api(method, path, text, as = "json") {
  const headers = {...authHeaders()};
  const init = {method, headers};
  if (text !== undefined) {
    const {body, type} = bodyOf(text);
    headers["Content-Type"] = type;
    init.body = body;
  }
  let response = await fetch(path, init);
  // A job's picture not drawn yet answers 202 (it is being drawn): ask again after its Retry-After.
  while (response.status === 202 && as === "blob") {
    await sleep(1000 * Math.min(5, Number(response.headers.get("Retry-After")) || 1));
    response = await fetch(path, init);
  }
  if (!response.ok) {
    let body = null;
    try { body = await response.json(); } catch (_) { /* not JSON */ }
    throw new ApiError(response.status, body);
  }
  return as === "blob" ? response.blob() : response.json();
}

// ---- status line and progress bar ---------------------------------------------------------------------------
function setStatus(node, state, text) {
  node.dataset.state = state;
  node.textContent = text;
}

function setProgress(node, fraction, text) {
  node.hidden = fraction === null;
  if (fraction === null) return;
  $(".fill", node).style.width = `${Math.round(100 * fraction)}%`;
  $(".label", node).textContent = text;
  node.dataset.value = String(fraction);
}

// Poll a job until it ends; `onUpdate(job)` sees every status read. Resolves with the last status.
async function followJob(id, onUpdate) {
  for (;;) {
    const job = await api("GET", `/v1/jobs/${id}`);
    onUpdate(job);
    if (!["queued", "running"].includes(job.status)) return job;
    await sleep(200);
  }
}

// ---- pictures -----------------------------------------------------------------------------------------------
function pictureSlot(kind, title) {
  const img = el("img", {alt: `${title || KIND_TITLES[kind]} (loading)`, "data-kind": kind});
  const download = el("a", {class: "download", text: "SVG", hidden: ""});
  const figure = el("figure", {class: `picture picture-${kind}`, "data-kind": kind},
    el("figcaption", {}, el("span", {text: title || KIND_TITLES[kind]}), download),
    el("div", {class: "frame loading"}, img));
  return {figure, img, download};
}

async function fillPicture(slot, load) {
  const frame = slot.img.parentElement;
  try {
    const blob = await load();
    const url = URL.createObjectURL(blob);
    slot.img.src = url;
    slot.img.alt = slot.figure.querySelector("figcaption span").textContent;
    slot.download.href = url;
    slot.download.download = `clustersim-${slot.img.dataset.kind}.svg`;
    slot.download.hidden = false;
    await slot.img.decode().catch(() => undefined);
    frame.classList.remove("loading");
    slot.figure.dataset.loaded = "true";
  } catch (err) {
    frame.classList.remove("loading");
    frame.replaceChildren(el("div", {class: "error", text: String(err.message || err)}));
    slot.figure.dataset.loaded = "error";
  }
}

// ---- a result -----------------------------------------------------------------------------------------------
function figureCard(label, text, field, value, note) {
  return el("div", {class: "card", "data-field": field, "data-value": value === undefined ? "" : String(value)},
    el("div", {class: "card-label", text: label}),
    el("div", {class: "card-value", text}),
    note ? el("div", {class: "card-note", text: note}) : null);
}

function headline(result) {
  const memory = result.memory;
  return el("div", {class: "cards"},
    figureCard("Iteration time", seconds(result.iteration_time_s), "iteration_time_s", result.iteration_time_s),
    figureCard("Throughput", `${number(result.tokens_per_s)} tok/s`, "tokens_per_s", result.tokens_per_s,
      `${number(result.samples_per_s, 2)} samples/s`),
    figureCard("MFU", percent(result.mfu), "mfu", result.mfu,
      `${number(result.model_tflops_per_gpu, 1)} TFLOP/s per GPU`),
    figureCard("HFU", percent(result.hfu), "hfu", result.hfu,
      `${number(result.hardware_tflops_per_gpu, 1)} TFLOP/s per GPU`),
    figureCard("Pipeline bubble", percent(result.bubble_fraction), "bubble_fraction", result.bubble_fraction,
      `overhead ${percent(result.pipeline_overhead)} of ideal compute`),
    figureCard("Peak memory", gib(memory.peak_gib_per_gpu), "peak_gib_per_gpu", memory.peak_gib_per_gpu,
      `${memory.fits ? "fits" : "does not fit"} in ${number(memory.capacity_gib, 0)} GiB`));
}

function breakdownTable(result) {
  const total = result.iteration_time_s;
  const rows = Object.entries(result.time_breakdown_s).filter(([, s]) => s > 0);
  return el("table", {class: "grid compact", "data-table": "breakdown"},
    el("thead", {}, el("tr", {}, el("th", {text: "category"}), el("th", {text: "time"}), el("th", {text: "share"}))),
    el("tbody", {}, rows.map(([name, s]) => el("tr", {},
      el("td", {text: name}), el("td", {class: "num", text: seconds(s)}), el("td", {class: "num", text: percent(s / total)})))));
}

function layersText(layers) {
  return Object.entries(layers).map(([k, v]) => `${v} ${k}`).join(", ");
}

function stagesTable(result) {
  return el("table", {class: "grid compact", "data-table": "stages"},
    el("thead", {}, el("tr", {}, ["stage", "holds", "forward", "backward", "bubble", "busy", "memory"].map(
      (h) => el("th", {text: h})))),
    el("tbody", {}, result.stages.map((s) => el("tr", {},
      el("td", {class: "num", text: s.index}), el("td", {text: layersText(s.layers)}),
      el("td", {class: "num", text: seconds(s.forward_s)}), el("td", {class: "num", text: seconds(s.backward_s)}),
      el("td", {class: "num", text: seconds(s.bubble_s)}), el("td", {class: "num", text: percent(s.busy_fraction)}),
      el("td", {class: "num", text: gib(s.memory.peak_gib_per_gpu)})))));
}

// Show a result and its pictures; `picture(kind)` loads one picture as a blob.
function showResult(container, result, picture, subtitle) {
  const slots = KINDS.map((kind) => pictureSlot(kind));
  const simulator = result.simulator || {};
  container.replaceChildren(...[
    el("div", {class: "result-head"},
      el("h2", {text: "Result"}),
      el("span", {class: "meta", text: subtitle || ""}),
      el("span", {class: "meta", text: `${number(simulator.events)} events, ${simulator.simulated_ranks} ranks simulated, `
        + `${simulator.fidelity} fidelity, simulator ${simulator.version}`})),
    headline(result),
    result.warnings && result.warnings.length
      ? el("ul", {class: "warnings"}, result.warnings.map((w) => el("li", {text: w}))) : null,
    slots[0].figure,
    el("div", {class: "pictures-row"}, slots[1].figure, slots[2].figure),
    el("div", {class: "tables-row"},
      el("div", {}, el("h3", {text: "Where the time goes (critical rank)"}), breakdownTable(result)),
      el("div", {}, el("h3", {text: "Stages"}), stagesTable(result)))].filter((node) => node !== null));
  container.dataset.result = JSON.stringify({iteration_time_s: result.iteration_time_s, mfu: result.mfu,
    bubble_fraction: result.bubble_fraction, tokens_per_s: result.tokens_per_s});
  return Promise.all(slots.map((slot, i) => fillPicture(slot, () => picture(KINDS[i]))));
}

function showError(container, err) {
  container.replaceChildren(el("div", {class: "error-box"}, el("b", {text: "Error"}), el("pre", {text: err.message || String(err)})));
}

// ---- the Simulate tab -----------------------------------------------------------------------------------------
async function runInline() {
  const text = $("#request").value;
  const status = $("#sim-status");
  const container = $("#sim-result");
  setProgress($("#sim-progress"), null);
  setStatus(status, "running", "simulating…");
  container.replaceChildren(el("div", {class: "empty", text: "Simulating…"}));
  try {
    const started = performance.now();
    const result = await api("POST", "/v1/simulations", text);
    const elapsed = (performance.now() - started) / 1000;
    setStatus(status, "succeeded", `done in ${elapsed.toFixed(2)} s`);
    await showResult(container, result, (kind) => api("POST", `/v1/plots?kind=${kind}&format=svg`, text, "blob"),
      "inline");
  } catch (err) {
    setStatus(status, "failed", err.status === 413 ? "too large to answer inline: submit it as a job" : "failed");
    showError(container, err);
  }
}

async function runJob() {
  const text = $("#request").value;
  const status = $("#sim-status");
  const bar = $("#sim-progress");
  const container = $("#sim-result");
  try {
    const job = await api("POST", "/v1/jobs", text);
    setStatus(status, job.status, `job ${job.id.slice(0, 8)}: ${job.status}`);
    container.replaceChildren(el("div", {class: "empty",
      text: `Job ${job.id} accepted: its result and pictures appear here once it has succeeded.`}));
    const seen = [];
    const statuses = [job.status];
    const last = await followJob(job.id, (j) => {
      seen.push(j.progress);
      if (statuses[statuses.length - 1] !== j.status) statuses.push(j.status);
      bar.dataset.statuses = JSON.stringify(statuses);
      setStatus(status, j.status, `job ${j.id.slice(0, 8)}: ${j.status}`);
      setProgress(bar, j.progress, `${(100 * j.progress).toFixed(0)}%`);
    });
    bar.dataset.seen = JSON.stringify(seen);
    if (last.status !== "succeeded") throw new Error(`job ${last.status}: ${last.error ? last.error.message : ""}`);
    const result = await api("GET", `/v1/jobs/${job.id}/result`);
    await showResult(container, result, (kind) => api("GET", `/v1/jobs/${job.id}/plot?kind=${kind}&format=svg`,
      undefined, "blob"), `job ${job.id}`);
  } catch (err) {
    if (!["failed", "cancelled", "timed_out"].includes(status.dataset.state)) setStatus(status, "failed", "failed");
    showError(container, err);
  }
}

// ---- the Compare tab ------------------------------------------------------------------------------------------
let compareCount = 0;

function addCompareEditor(example) {
  compareCount += 1;
  const letter = String.fromCharCode(64 + compareCount);
  const select = exampleSelect();
  const textarea = el("textarea", {class: "compare-request", spellcheck: "false", "aria-label": `request ${letter}`});
  textarea.value = pretty(EXAMPLES[example].request);
  select.value = String(example);
  select.addEventListener("change", () => { textarea.value = pretty(EXAMPLES[Number(select.value)].request); });
  const label = el("input", {class: "compare-label", value: letter, "aria-label": `label ${letter}`});
  $("#compare-editors").append(el("div", {class: "panel compare-editor"},
    el("div", {class: "panel-head"}, label, select), textarea));
}

async function runCompare() {
  const status = $("#compare-status");
  const container = $("#compare-result");
  const editors = [...document.querySelectorAll(".compare-editor")];
  const texts = editors.map((e) => $(".compare-request", e).value);
  const labels = editors.map((e) => $(".compare-label", e).value.trim());
  setStatus(status, "running", `simulating ${texts.length} requests…`);
  try {
    const requests = texts.map((text) => {
      try { return JSON.parse(text); } catch (_) { throw new Error("each request of a comparison is JSON here"); }
    });
    const body = JSON.stringify({requests, labels});
    const answer = await api("POST", "/v1/comparisons", body);
    setStatus(status, "succeeded", "done");
    const rows = answer.rows;
    const metrics = [
      ["layout", (r) => r.summary],
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
    const best = Math.max(...rows.map((r) => r.tokens_per_s));
    const table = el("table", {class: "grid compare-table", "data-table": "comparison"},
      el("thead", {}, el("tr", {}, el("th", {text: "figure"}), rows.map((r) => el("th", {
        text: r.label, class: r.tokens_per_s === best ? "best" : null})))),
      el("tbody", {}, metrics.map(([name, get]) => el("tr", {}, el("td", {text: name}),
        rows.map((r) => el("td", {class: "num", text: get(r), "data-label": r.label}))))));
    const slots = rows.map((r) => pictureSlot("timeline", `${r.label}: pipeline timeline`));
    const breakdowns = rows.map((r) => pictureSlot("breakdown", `${r.label}: where the time goes`));
    container.replaceChildren(el("h2", {text: "Comparison"}), table,
      el("div", {class: "pictures-row"}, breakdowns.map((s) => s.figure)), ...slots.map((s) => s.figure));
    await Promise.all([
      ...slots.map((slot, i) => fillPicture(slot, () => api("POST", "/v1/plots?kind=timeline", texts[i], "blob"))),
      ...breakdowns.map((slot, i) => fillPicture(slot, () => api("POST", "/v1/plots?kind=breakdown", texts[i], "blob"))),
    ]);
  } catch (err) {
    setStatus(status, "failed", "failed");
    showError(container, err);
  }
}

// ---- the Search tab -------------------------------------------------------------------------------------------
async function runSearch() {
  const text = $("#search-request").value;
  const status = $("#search-status");
  const bar = $("#search-progress");
  const container = $("#search-result");
  try {
    const job = await api("POST", "/v1/searches", text);
    const last = await followJob(job.id, (j) => {
      setStatus(status, j.status, `search ${j.id.slice(0, 8)}: ${j.status}`);
      setProgress(bar, j.progress, `${(100 * j.progress).toFixed(0)}% of the candidates`);
    });
    if (last.status !== "succeeded") throw new Error(`search ${last.status}: ${last.error ? last.error.message : ""}`);
    await showSearch(container, job.id);
  } catch (err) {
    if (status.dataset.state !== "failed") setStatus(status, "failed", "failed");
    showError(container, err);
  }
}

// A discarded family (the result's {dp, tp, pp, zero_stage, recompute, sequence_parallel, cp?}) in one line,
// as the CLI's table writes it: "DP 8 x TP 4 x PP 2 x CP 2, ZeRO 1, recompute full, SP".
function familyLabel(f) {
  if (f === null || typeof f !== "object") return String(f);
  const shape = `DP ${f.dp} x TP ${f.tp} x PP ${f.pp}` + (f.cp > 1 ? ` x CP ${f.cp}` : "");
  return [shape, `ZeRO ${f.zero_stage}`, `recompute ${f.recompute}`].concat(f.sequence_parallel ? ["SP"] : [])
    .join(", ");
}

// Show a succeeded search job's ranking, its picture and the families it discarded.
async function showSearch(container, id) {
  const result = await api("GET", `/v1/jobs/${id}/result`);
  const s = result.search;
  const top = result.top.map((c) => el("tr", {},
    el("td", {class: "num", text: c.rank}), el("td", {text: c.summary}),
    el("td", {class: "num", text: number(c.tokens_per_s)}), el("td", {class: "num", text: seconds(c.iteration_time_s)}),
    el("td", {class: "num", text: percent(c.mfu)}), el("td", {class: "num", text: percent(c.bubble_fraction)}),
    el("td", {class: "num", text: gib(c.memory.headroom_gib)}),
    el("td", {class: "why"}, [].concat(c.why || []).map((reason) => el("div", {text: reason})))));
  const families = (result.discarded_families || []).slice(0, 12).map((f) => el("tr", {},
    el("td", {text: familyLabel(f.family)}), el("td", {class: "num", text: number(f.layouts)}), el("td", {text: f.kind}),
    el("td", {class: "why", text: f.reason})));
  const slot = pictureSlot("search", "Top layouts and the families discarded");
  container.replaceChildren(...[
    el("h2", {text: "Search"}),
    el("p", {class: "meta", text: `${number(s.generated)} layouts generated, ${number(s.discarded.invalid)} break a rule, `
      + `${number(s.discarded.memory)} do not fit, ${number(s.simulated)} simulated (stopped by ${s.stopped_by})`}),
    el("table", {class: "grid", "data-table": "search"},
      el("thead", {}, el("tr", {}, ["rank", "layout", "tokens/s", "iteration", "MFU", "bubble", "headroom", "why"]
        .map((h) => el("th", {text: h})))), el("tbody", {}, top)),
    slot.figure,
    families.length ? el("h3", {text: "Families discarded"}) : null,
    families.length ? el("table", {class: "grid compact"}, el("thead", {}, el("tr", {},
      ["family", "layouts", "kind", "reason"].map((h) => el("th", {text: h})))), el("tbody", {}, families)) : null,
  ].filter((node) => node !== null));
  await fillPicture(slot, () => api("GET", `/v1/jobs/${id}/plot?kind=search`, undefined, "blob"));
}

// ---- the Jobs tab ---------------------------------------------------------------------------------------------
async function refreshJobs() {
  const body = $("#jobs-table tbody");
  try {
    const page = await api("GET", "/v1/jobs?limit=50");
    $("#jobs-empty").hidden = page.jobs.length > 0;
    body.replaceChildren(...page.jobs.map((job) => {
      const ran = job.started_at && job.finished_at
        ? seconds((Date.parse(job.finished_at) - Date.parse(job.started_at)) / 1000) : "";
      const open = job.status === "succeeded"
        ? el("button", {type: "button", text: "Open", onclick: () => openJob(job.id, job.kind)}) : null;
      const cancel = ["queued", "running"].includes(job.status)
        ? el("button", {type: "button", text: "Cancel", onclick: async () => {
          await api("DELETE", `/v1/jobs/${job.id}`).catch(() => undefined);
          refreshJobs();
        }}) : null;
      return el("tr", {"data-job": job.id},
        el("td", {class: "mono", text: job.id.slice(0, 12)}), el("td", {text: job.kind}),
        el("td", {}, el("span", {class: `badge ${job.status}`, text: job.status})),
        el("td", {class: "num", text: percent(job.progress)}),
        el("td", {text: new Date(job.created_at).toLocaleString()}), el("td", {class: "num", text: ran}),
        el("td", {}, open, cancel));
    }));
  } catch (err) {
    body.replaceChildren(el("tr", {}, el("td", {colspan: "7", class: "error", text: err.message})));
  }
}

async function openJob(id, kind) {
  const search = kind === "search";
  switchTab(search ? "search" : "simulate");
  const container = search ? $("#search-result") : $("#sim-result");
  try {
    if (search) {
      await showSearch(container, id);
      return;
    }
    const result = await api("GET", `/v1/jobs/${id}/result`);
    await showResult(container, result, (kind) => api("GET", `/v1/jobs/${id}/plot?kind=${kind}&format=svg`,
      undefined, "blob"), `job ${id}`);
  } catch (err) {
    showError(container, err);
  }
}

// ---- import and export of launch configurations -----------------------------------------------------------------
const EXPORT_FILES = {megatron: "pretrain_gpt.sh", torchtitan: "train.toml", deepspeed: "launch_deepspeed.sh"};
const IMPORT_HINTS = {
  megatron: "torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --num-layers 32 ... (or a log's arguments block)",
  torchtitan: "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\n...",
  deepspeed: "{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": 1, \"zero_optimization\": {\"stage\": 1}}",
  hf: "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 4096, ...}",
};

// The body of POST /v1/imports/{kind}: the text, the cluster preset, the nodes when given, the model for deepspeed.
function importBody(kind, text, cluster, nodes, model) {
  const body = {text, cluster};
  if (nodes !== "" && nodes !== null && nodes !== undefined) body.nodes = Number(nodes);
  if (kind === "deepspeed") body.model = model;
  return body;
}

// The file a framework's launch configuration is saved as.
function exportFileName(kind) {
  return EXPORT_FILES[kind] || `${kind}.txt`;
}

// The ignored and assumed keys of an import, as "key: value" lines.
function noteLines(entries) {
  return Object.entries(entries || {}).map(([key, value]) => `${key}: ${JSON.stringify(value)}`);
}

// An error as the lines a user acts on: each "field: rule" the API named, else the message.
function errorText(err) {
  const details = (err && err.body && err.body.error && err.body.error.details) || [];
  return details.length ? details.map((d) => `${d.field}: ${d.rule}`).join("\n") : String((err && err.message) || err);
}

function showNotes(container, answer) {
  const parts = [];
  for (const [title, entries, what] of [
    ["Ignored", answer.ignored, "in the input, not representable in a request"],
    ["Assumed", answer.assumed, "not said by the input"]]) {
    const lines = noteLines(entries);
    if (!lines.length) continue;
    parts.push(el("h4", {text: `${title} (${lines.length}): ${what}`}),
      el("ul", {"data-notes": title.toLowerCase()}, lines.map((line) => el("li", {}, el("code", {text: line})))));
  }
  container.replaceChildren(...(parts.length ? parts : [el("div", {class: "meta", text: "Nothing ignored or assumed."})]));
}

async function runImport() {
  const kind = $("#imp-kind").value;
  const status = $("#imp-status");
  const notes = $("#imp-notes");
  setStatus(status, "running", "importing…");
  try {
    const body = importBody(kind, $("#imp-text").value, $("#imp-cluster").value, $("#imp-nodes").value,
      $("#imp-model").value);
    const answer = await api("POST", `/v1/imports/${kind}`, JSON.stringify(body));
    $("#request").value = pretty(answer.request);
    setStatus(status, "succeeded", "loaded into the request");
    showNotes(notes, answer);
  } catch (err) {
    setStatus(status, "failed", "failed");
    notes.replaceChildren(el("div", {class: "error-box"}, el("b", {text: `Not imported (${err.status || "error"})`}),
      el("pre", {text: errorText(err)})));
  }
}

async function runExport() {
  const kind = $("#exp-kind").value;
  const status = $("#exp-status");
  const box = $("#exp-error");
  box.hidden = true;
  setStatus(status, "running", "exporting…");
  try {
    const answer = await api("POST", `/v1/exports/${kind}`, $("#request").value);
    const name = exportFileName(kind);
    const link = el("a", {href: URL.createObjectURL(new Blob([answer.text], {type: "text/plain"})), download: name});
    document.body.append(link);
    link.click();
    link.remove();
    status.dataset.file = name;
    setStatus(status, "succeeded", `saved ${name}`);
  } catch (err) {
    setStatus(status, "failed", "failed");
    box.replaceChildren(el("b", {text: `Cannot export (${err.status || "error"})`}), el("pre", {text: errorText(err)}));
    box.hidden = false;
  }
}

function syncImportKind() {
  const kind = $("#imp-kind").value;
  $("#imp-model-label").hidden = kind !== "deepspeed";
  $("#imp-text").placeholder = IMPORT_HINTS[kind];
}

// ---- presets and the request builder --------------------------------------------------------------------------
function exampleSelect() {
  return el("select", {"aria-label": "example"}, EXAMPLES.map((e, i) => el("option", {value: String(i), text: e.name})));
}

async function loadPresets() {
  try {
    const [models, clusters] = await Promise.all([api("GET", "/v1/presets/models"), api("GET", "/v1/presets/clusters")]);
    $("#b-model").replaceChildren(...Object.keys(models.models).map((name) => el("option", {text: name})));
    $("#b-cluster").replaceChildren(...Object.entries(clusters.clusters).map(([name, c]) =>
      el("option", {text: name, title: c.description || ""})));
    $("#b-model").value = "gpt3-13b";
    $("#b-cluster").value = "dgx-a100";
    $("#imp-model").replaceChildren(...Object.keys(models.models).map((name) => el("option", {text: name})));
    $("#imp-cluster").replaceChildren(...Object.keys(clusters.clusters).map((name) => el("option", {text: name})));
    $("#imp-model").value = "gpt3-1.3b";
    $("#imp-cluster").value = "dgx-h100";
  } catch (err) {
    $("#b-model").replaceChildren(el("option", {text: "(presets unavailable: " + err.status + ")"}));
  }
}

function writeFromBuilder() {
  const n = (id) => Number($(id).value);
  const layout = {dp: n("#b-dp"), tp: n("#b-tp"), pp: n("#b-pp"), microbatch_size: n("#b-mb"),
    global_batch_size: n("#b-gbs"), schedule: $("#b-schedule").value, recompute: $("#b-recompute").value,
    zero_stage: n("#b-zero")};
  if (n("#b-v") > 1) layout.virtual_stages = n("#b-v");
  $("#request").value = pretty({model: {preset: $("#b-model").value},
    cluster: {preset: $("#b-cluster").value, num_nodes: n("#b-nodes")}, layout});
}

// ---- tabs and start-up ----------------------------------------------------------------------------------------
let jobsTimer = null;

function switchTab(name) {
  document.querySelectorAll(".tab-button").forEach((b) => b.classList.toggle("active", b.dataset.tab === name));
  document.querySelectorAll(".tab").forEach((t) => t.classList.toggle("active", t.id === `tab-${name}`));
  clearInterval(jobsTimer);
  if (name === "jobs") {
    refreshJobs();
    jobsTimer = setInterval(refreshJobs, 2000);
  }
}

function start() {
  const select = $("#example");
  select.replaceChildren(...exampleSelect().children);
  select.value = "0";
  select.addEventListener("change", () => { $("#request").value = pretty(EXAMPLES[Number(select.value)].request); });
  $("#request").value = pretty(EXAMPLES[0].request);
  $("#search-request").value = pretty(SEARCH_EXAMPLE);
  const tokenInput = $("#token");
  tokenInput.value = token();
  tokenInput.addEventListener("change", () => {
    sessionStorage.setItem(TOKEN_KEY, tokenInput.value.trim());
    loadPresets();
  });
  document.querySelectorAll(".tab-button").forEach((b) => b.addEventListener("click", () => switchTab(b.dataset.tab)));
  $("#run-inline").addEventListener("click", runInline);
  $("#run-job").addEventListener("click", runJob);
  $("#b-write").addEventListener("click", writeFromBuilder);
  $("#imp-kind").addEventListener("change", syncImportKind);
  $("#imp-run").addEventListener("click", runImport);
  $("#exp-download").addEventListener("click", runExport);
  syncImportKind();
  $("#compare-add").addEventListener("click", () => addCompareEditor(1));
  $("#compare-run").addEventListener("click", runCompare);
  $("#search-run").addEventListener("click", runSearch);
  $("#jobs-refresh").addEventListener("click", refreshJobs);
  addCompareEditor(3);
  addCompareEditor(4);
  loadPresets();
  fetch("/openapi.json").then((r) => r.json()).then((spec) => {
    $("#server-info").textContent = `clustersim ${spec.info.version} · ${location.host}`;
  }).catch(() => undefined);
  document.body.dataset.ready = "true";
}

document.addEventListener("DOMContentLoaded", start);
