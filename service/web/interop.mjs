// Import and export of launch configurations (on the Simulate tab): a pasted Megatron-LM command line or log, a
// torchtitan TOML, a ds_config.json or a config.json loaded into the request (POST /v1/imports/{fw}), and the
// current request's launch configuration saved as the framework's file (POST /v1/exports/{fw}).
import {$, el, pretty, setStatus} from "./dom.mjs";
import {api, errorText} from "./api.mjs";

export const EXPORT_FILES = {megatron: "pretrain_gpt.sh", torchtitan: "train.toml", deepspeed: "launch_deepspeed.sh"};
const IMPORT_HINTS = {
  megatron: "torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --num-layers 32 ... (or a log's arguments block)",
  torchtitan: "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\n...",
  deepspeed: "{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": 1, \"zero_optimization\": {\"stage\": 1}}",
  hf: "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 4096, ...}",
};

// The body of POST /v1/imports/{kind}: the text, the cluster preset, the nodes when given, the model for deepspeed.
export function importBody(kind, text, cluster, nodes, model) {
  const body = {text, cluster};
  if (nodes !== "" && nodes !== null && nodes !== undefined) body.nodes = Number(nodes);
  if (kind === "deepspeed") body.model = model;
  return body;
}

// The file a framework's launch configuration is saved as.
export function exportFileName(kind) {
  return EXPORT_FILES[kind] || `${kind}.txt`;
}

// The ignored and assumed keys of an import, as "key: value" lines.
export function noteLines(entries) {
  return Object.entries(entries || {}).map(([key, value]) => `${key}: ${JSON.stringify(value)}`);
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

export async function runImport() {
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

export async function runExport() {
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

export function syncImportKind() {
  const kind = $("#imp-kind").value;
  $("#imp-model-label").hidden = kind !== "deepspeed";
  $("#imp-text").placeholder = IMPORT_HINTS[kind];
}
