// A simulation result on the page: the headline figures, the warnings, the pictures and the tables of the time
// breakdown and of the stages; and an error, or why a job did not succeed, in their place.
import {el, gib, number, percent, seconds, stateText} from "./dom.mjs";
import {jobReason} from "./api.mjs";
import {KINDS, fillPicture, pictureSlot} from "./pictures.mjs";

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

const layersText = (layers) => Object.entries(layers).map(([k, v]) => `${v} ${k}`).join(", ");

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

// Show a result and its pictures; `picture(kind, onWait)` loads one picture as a blob (api.mjs, pictureBlob).
export function showResult(container, result, picture, subtitle) {
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
  return Promise.all(slots.map((slot, i) => fillPicture(slot, (onWait) => picture(KINDS[i], onWait))));
}

export function showError(container, err) {
  container.replaceChildren(el("div", {class: "error-box"}, el("b", {text: "Error"}),
    el("pre", {text: err.message || String(err)})));
}

// A job that did not succeed: its status and the reason the API gives (its error's message and fields).
export function showJobFailure(container, job) {
  container.replaceChildren(el("div", {class: "error-box", "data-job": job.id, "data-status": job.status},
    el("b", {text: `Job ${job.id} ${stateText(job.status)}`}),
    job.error ? el("span", {class: "meta", text: ` (${job.error.code})`}) : null,
    el("pre", {class: "job-reason", text: jobReason(job) || "no reason given"})));
}
