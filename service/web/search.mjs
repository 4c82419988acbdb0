// The Search tab: a search request runs as a search job; its ranking (with the whole run's days and cost when the
// request has a training section, as `clustersim search` prints them), its picture and the families discarded.
import {$, el, gib, number, percent, seconds, setProgress, setStatus, stateText} from "./dom.mjs";
import {api, followJob, pictureBlob} from "./api.mjs";
import {fillPicture, pictureSlot} from "./pictures.mjs";
import {showError, showJobFailure} from "./result.mjs";

const FAMILIES_SHOWN = 12; // as the CLI's table (service/cli/search.py, DISCARDED_SHOWN)

// A discarded family (the result's {dp, tp, pp, zero_stage, recompute, sequence_parallel, cp?}) in one line,
// as the CLI's table writes it: "DP 8 x TP 4 x PP 2 x CP 2, ZeRO 1, recompute full, SP".
export function familyLabel(f) {
  if (f === null || typeof f !== "object") return String(f);
  const shape = `DP ${f.dp} x TP ${f.tp} x PP ${f.pp}` + (f.cp > 1 ? ` x CP ${f.cp}` : "");
  return [shape, `ZeRO ${f.zero_stage}`, `recompute ${f.recompute}`].concat(f.sequence_parallel ? ["SP"] : [])
    .join(", ");
}

// Why a family was discarded, as text: the result's "field: rule" string, or a {field, rule} (or {message}) object.
export function reasonText(reason) {
  if (reason === null || reason === undefined) return "";
  if (typeof reason !== "object") return String(reason);
  if (reason.field && reason.rule) return `${reason.field}: ${reason.rule}`;
  return reason.message || reason.rule || JSON.stringify(reason);
}

export const TRAINING_COLUMNS = ["days", "GPU-hours", "cost USD", "goodput"];

// A ranked layout's whole run, with checkpoints and failures, as the CLI's table writes it: days (2 decimals),
// GPU-hours and cost (whole, with thousands separators; "–" without a GPU-hour price) and goodput (3 decimals).
export function trainingCells(training) {
  const run = training.with_failures;
  return [run.days.toFixed(2), number(run.gpu_hours), number(run.cost_usd), training.goodput.toFixed(3)];
}

export async function runSearch() {
  const status = $("#search-status");
  try {
    const job = await api("POST", "/v1/searches", $("#search-request").value);
    await watchSearch(job);
  } catch (err) {
    setStatus(status, "failed", "failed");
    showError($("#search-result"), err);
  }
}

// Follow a search job to its end, then show its result or why it did not succeed.
export async function watchSearch(job) {
  const status = $("#search-status");
  const bar = $("#search-progress");
  const container = $("#search-result");
  container.replaceChildren(el("div", {class: "empty", text: `Search ${job.id} ${stateText(job.status)}…`}));
  const last = await followJob(job.id, (j) => {
    setStatus(status, j.status, `search ${j.id.slice(0, 8)}: ${stateText(j.status)}`);
    setProgress(bar, j.progress, `${(100 * j.progress).toFixed(0)}% of the candidates`);
  });
  if (last.status !== "succeeded") {
    setProgress(bar, null);
    showJobFailure(container, last);
    return last;
  }
  await showSearch(container, job.id);
  return last;
}

function rankingTable(result) {
  const run = result.top.some((c) => c.training);
  const head = ["rank", "layout", "tokens/s", "iteration", "MFU", "bubble", "headroom"]
    .concat(run ? TRAINING_COLUMNS : [], ["why"]);
  const rows = result.top.map((c) => el("tr", {},
    el("td", {class: "num", text: c.rank}), el("td", {text: c.summary}),
    el("td", {class: "num", text: number(c.tokens_per_s)}), el("td", {class: "num", text: seconds(c.iteration_time_s)}),
    el("td", {class: "num", text: percent(c.mfu)}), el("td", {class: "num", text: percent(c.bubble_fraction)}),
    el("td", {class: "num", text: gib(c.memory.headroom_gib)}),
    run ? (c.training ? trainingCells(c.training) : TRAINING_COLUMNS.map(() => "–")).map(
      (text, i) => el("td", {class: "num", "data-column": TRAINING_COLUMNS[i], text})) : [],
    el("td", {class: "why"}, [].concat(c.why || []).map((reason) => el("div", {text: reason})))));
  return el("table", {class: "grid", "data-table": "search"},
    el("thead", {}, el("tr", {}, head.map((h) => el("th", {text: h})))), el("tbody", {}, rows));
}

function familiesTable(families) {
  return el("table", {class: "grid compact", "data-table": "families"},
    el("thead", {}, el("tr", {}, ["family", "layouts", "kind", "reason"].map((h) => el("th", {text: h})))),
    el("tbody", {}, families.slice(0, FAMILIES_SHOWN).map((f) => el("tr", {},
      el("td", {text: familyLabel(f.family)}), el("td", {class: "num", text: number(f.layouts)}),
      el("td", {text: f.kind}), el("td", {class: "why", text: reasonText(f.reason)})))));
}

// Show a succeeded search job's ranking, its picture and the families it discarded.
export async function showSearch(container, id) {
  const result = await api("GET", `/v1/jobs/${id}/result`);
  const s = result.search;
  const families = result.discarded_families || [];
  const slot = pictureSlot("search", "Top layouts and the families discarded");
  container.replaceChildren(...[
    el("h2", {text: "Search"}),
    el("p", {class: "meta", text: `${number(s.generated)} layouts generated, ${number(s.discarded.invalid)} break a rule, `
      + `${number(s.discarded.memory)} do not fit, ${number(s.simulated)} simulated (stopped by ${s.stopped_by}); `
      + `ranked by ${result.problem.objective}`}),
    rankingTable(result),
    slot.figure,
    families.length ? el("h3", {text: `Families discarded (${families.length})`
      + (families.length > FAMILIES_SHOWN ? `: the first ${FAMILIES_SHOWN}` : "")}) : null,
    families.length ? familiesTable(families) : null,
  ].filter((node) => node !== null));
  await fillPicture(slot, (onWait) => pictureBlob("GET", `/v1/jobs/${id}/plot?kind=search`, undefined, onWait));
}
