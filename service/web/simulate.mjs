// The Simulate tab: a request run inline or as a job (followed to its end with its status and progress), a job
// opened from the Jobs tab, and the request builder on the model and cluster presets.
import {$, el, pretty, setProgress, setStatus, stateText} from "./dom.mjs";
import {api, followJob, pictureBlob} from "./api.mjs";
import {showError, showJobFailure, showResult} from "./result.mjs";

export async function runInline() {
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
    await showResult(container, result,
      (kind, onWait) => pictureBlob("POST", `/v1/plots?kind=${kind}&format=svg`, text, onWait), "inline");
  } catch (err) {
    setStatus(status, "failed", err.status === 413 ? "too large to answer inline: submit it as a job" : "failed");
    showError(container, err);
  }
}

export async function runJob() {
  const status = $("#sim-status");
  try {
    const job = await api("POST", "/v1/jobs", $("#request").value);
    await watchJob(job);
  } catch (err) {
    setStatus(status, "failed", "failed");
    showError($("#sim-result"), err);
  }
}

// Follow a simulation job to its end (its status line and progress bar), then show its result and pictures, or
// why it did not succeed. Resolves with its last status.
export async function watchJob(job) {
  const status = $("#sim-status");
  const bar = $("#sim-progress");
  const container = $("#sim-result");
  setStatus(status, job.status, `job ${job.id.slice(0, 8)}: ${stateText(job.status)}`);
  container.replaceChildren(el("div", {class: "empty",
    text: `Job ${job.id} ${stateText(job.status)}: its result and pictures appear here once it has succeeded.`}));
  const seen = [];
  const statuses = [job.status];
  const last = await followJob(job.id, (j) => {
    seen.push(j.progress);
    if (statuses[statuses.length - 1] !== j.status) statuses.push(j.status);
    bar.dataset.statuses = JSON.stringify(statuses);
    setStatus(status, j.status, `job ${j.id.slice(0, 8)}: ${stateText(j.status)}`);
    setProgress(bar, j.progress, `${(100 * j.progress).toFixed(0)}%`);
  });
  bar.dataset.seen = JSON.stringify(seen);
  if (last.status !== "succeeded") {
    setProgress(bar, null);
    showJobFailure(container, last);
    return last;
  }
  const result = await api("GET", `/v1/jobs/${job.id}/result`);
  await showResult(container, result,
    (kind, onWait) => pictureBlob("GET", `/v1/jobs/${job.id}/plot?kind=${kind}&format=svg`, undefined, onWait),
    `job ${job.id}`);
  return last;
}

// ---- presets and the request builder --------------------------------------------------------------------------
export async function loadPresets() {
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

export function writeFromBuilder() {
  const n = (id) => Number($(id).value);
  const layout = {dp: n("#b-dp"), tp: n("#b-tp"), pp: n("#b-pp"), microbatch_size: n("#b-mb"),
    global_batch_size: n("#b-gbs"), schedule: $("#b-schedule").value, recompute: $("#b-recompute").value,
    zero_stage: n("#b-zero")};
  if (n("#b-v") > 1) layout.virtual_stages = n("#b-v");
  $("#request").value = pretty({model: {preset: $("#b-model").value},
    cluster: {preset: $("#b-cluster").value, num_nodes: n("#b-nodes")}, layout});
}
