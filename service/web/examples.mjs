// The example requests the page offers: the Simulate and Compare tabs pick from EXAMPLES, the Search tab starts
// with SEARCH_EXAMPLE.
import {el} from "./dom.mjs";

export const EXAMPLES = [
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

export const SEARCH_EXAMPLE = {
  model: {preset: "gpt3-13b"},
  cluster: {preset: "dgx-a100", num_nodes: 8},
  global_batch_size: 512,
  space: {tp: [4, 8], recompute: ["selective", "full"]},
  bounds: {top_k: 5, max_candidates: 40},
};

// A <select> of the examples, by index.
export function exampleSelect() {
  return el("select", {"aria-label": "example"}, EXAMPLES.map((e, i) => el("option", {value: String(i), text: e.name})));
}

// Say in the examples' list that the editor holds another request (`text`, e.g. a job's): a choice of its own,
// hidden from the list, shown as the one selected.
export function showOtherRequest(select, text) {
  let other = select.querySelector("option[value='']");
  if (!other) {
    other = el("option", {value: "", hidden: ""});
    select.prepend(other);
  }
  other.textContent = text;
  select.value = "";
}
