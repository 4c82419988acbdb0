// The Jobs tab: the latest jobs with their status, progress and, for one that did not succeed, why. Opening a job
// loads its own request into its tab's editor (GET /v1/jobs/{id}/request) and shows its result, its progress if
// it still runs, or the reason it failed.
import {$, el, percent, pretty, seconds, setStatus, stateText} from "./dom.mjs";
import {api, jobReason} from "./api.mjs";
import {showOtherRequest} from "./examples.mjs";
import {showError} from "./result.mjs";
import {watchSearch} from "./search.mjs";
import {watchJob} from "./simulate.mjs";
import {switchTab} from "./tabs.mjs";

const ACTIVE = ["queued", "running"];

function jobRow(job) {
  const ran = job.started_at && job.finished_at
    ? seconds((Date.parse(job.finished_at) - Date.parse(job.started_at)) / 1000) : "";
  const reason = jobReason(job);
  const open = el("button", {type: "button", class: "open", text: "Open", onclick: () => openJob(job)});
  const cancel = ACTIVE.includes(job.status)
    ? el("button", {type: "button", text: "Cancel", onclick: async () => {
      await api("DELETE", `/v1/jobs/${job.id}`).catch(() => undefined);
      refreshJobs();
    }}) : null;
  return el("tr", {"data-job": job.id, "data-status": job.status},
    el("td", {class: "mono", text: job.id.slice(0, 12)}), el("td", {text: job.kind}),
    el("td", {}, el("span", {class: `badge ${job.status}`, text: stateText(job.status)})),
    el("td", {class: "num", text: percent(job.progress)}),
    el("td", {text: new Date(job.created_at).toLocaleString()}), el("td", {class: "num", text: ran}),
    el("td", {class: "reason", title: reason || null}, reason
      ? el("span", {}, job.error.code ? el("code", {text: job.error.code}) : null, " ", reason.split("\n")[0]) : null),
    el("td", {class: "actions-cell"}, open, cancel));
}

export async function refreshJobs() {
  const body = $("#jobs-table tbody");
  try {
    const page = await api("GET", "/v1/jobs?limit=50");
    $("#jobs-empty").hidden = page.jobs.length > 0;
    body.replaceChildren(...page.jobs.map(jobRow));
  } catch (err) {
    body.replaceChildren(el("tr", {}, el("td", {colspan: "8", class: "error", text: err.message})));
  }
}

// Open a job in its tab: its request in the editor, then its result, its progress or why it did not succeed.
export async function openJob(job) {
  const search = job.kind === "search";
  switchTab(search ? "search" : "simulate");
  const container = search ? $("#search-result") : $("#sim-result");
  const editor = search ? $("#search-request") : $("#request");
  try {
    editor.value = pretty(await api("GET", `/v1/jobs/${job.id}/request`));
    if (!search) showOtherRequest($("#example"), `the request of job ${job.id.slice(0, 8)}`);
    await (search ? watchSearch(job) : watchJob(job));
  } catch (err) {
    setStatus(search ? $("#search-status") : $("#sim-status"), "failed", "failed");
    showError(container, err);
  }
}
