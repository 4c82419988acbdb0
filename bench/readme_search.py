"""Write the search results quoted in the "Search and sweeps" section (docs/search.md, or wherever their markers
are: bench/doc_sections.py finds them) from the current code, between their markers: the GPT-3 175B problem's
generated and pruned layouts and its proven best layout, GPT-100B against T5-100B, and the search around the
published 1T layout. Every search here ends by its proof or a candidate count, never by time, so what it finds
depends on the code alone (the machine's speed, which `bench/search_speed.py` measures, is not figured here).
tests/test_readme_search.py fails when the documentation does not carry what this renders.

Run:  python bench/readme_search.py [--check]      (--check: write nothing; exit 1 if the results are stale)
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

if __spec__ is None:  # run as python bench/X.py, not python -m bench.X: the repository root first, as -m does
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from api_schemas.search import load_search_file
from bench.doc_sections import ROOT, holding
from bench.generated import write_or_check_between
from service.search import run_search

MARKERS = ("<!-- search-results: written by python bench/readme_search.py; do not edit by hand -->",
           "<!-- end of search results -->")
GPT3 = ROOT / "examples" / "search" / "gpt3-175b-1024-a100.search.json"
ONE_T = ROOT / "examples" / "gpt-1t-3072-a100.yaml"
ONE_T_CANDIDATES = 20
ENCODER_DECODER_CANDIDATES = 40
WORKERS = 2


def _wrap(bullet: str) -> str:
    return textwrap.fill(bullet, width=116, subsequent_indent="  ", break_on_hyphens=False)


def _layout(entry: dict[str, Any]) -> str:
    """A ranked layout as docs/search.md reads it."""
    lay = entry["layout"]
    parts = [f"DP {lay['dp']} x TP {lay['tp']}" + (f" x PP {lay['pp']}" if lay["pp"] > 1 else " without PP"),
             f"microbatch {lay['microbatch_size']}"]
    if lay["pp"] > 1:
        schedule = {"1f1b": "1F1B", "gpipe": "GPipe", "interleaved_1f1b": "interleaved 1F1B"}.get(
            lay["schedule"], lay["schedule"])
        parts.append(schedule + (f" (v = {lay['virtual_stages']})" if lay.get("virtual_stages", 1) > 1 else ""))
    parts.append(f"ZeRO {lay['zero_stage']}")
    if lay.get("recompute", "none") != "none":
        parts.append(f"{lay['recompute']} recomputation")
    if lay.get("sequence_parallel"):
        parts.append("sequence parallelism")
    return ", ".join(parts)


def _counts(search: dict[str, Any]) -> str:
    return (f"{search['generated']:,} layouts generated, {search['pruned']:,} discarded "
            f"({search['discarded']['invalid']:,} break a layout rule, {search['discarded']['memory']:,} do not fit)")


def _stopped(search: dict[str, Any], why: bool = False) -> str:
    if search["stopped_by"] == "proven_best":
        return f"{search['simulated']} simulated, the best proven" + (
            " (no other layout's bound, its estimate over its kind's measured error, beats it)" if why else "")
    return f"{search['simulated']} simulated (stopped by {search['stopped_by']})"


def gpt3() -> str:
    whole = run_search({"model": {"preset": "gpt3-175b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 128},
                        "global_batch_size": 1536}, top_k=1, workers=WORKERS)
    narrowed = run_search(load_search_file(str(GPT3)), workers=WORKERS)
    best, narrowed_best = whole["best"], narrowed["best"]
    return (f"- GPT-3 175B on 1024 A100s, global batch 1536 (the problem `bench/search_speed.py` times): "
            f"{_counts(whole['search'])}, {whole['search']['feasible']:,} feasible, {_stopped(whole['search'], True)}: "
            f"{_layout(best)}: {best['tokens_per_s']:,.0f} tokens/s, MFU {100 * best['mfu']:.1f}%. "
            f"`clustersim search examples/search/gpt3-175b-1024-a100.search.json` (TP 4 or 8, selective or full "
            f"recomputation: {narrowed['search']['feasible']:,} feasible, {_stopped(narrowed['search'])}) finds "
            f"{'the same' if narrowed_best['layout'] == best['layout'] else _layout(narrowed_best)}.")


def encoder_decoder() -> str:
    found = {}
    for preset in ("gpt-100b", "t5-100b"):
        found[preset] = run_search({"model": {"preset": preset}, "cluster": {"preset": "dgx-a100", "num_nodes": 128},
                                    "global_batch_size": 1536,
                                    "space": {"tp": [4, 8], "recompute": ["selective", "full"]},
                                    "bounds": {"max_candidates": ENCODER_DECODER_CANDIDATES, "top_k": 1}},
                                   workers=WORKERS)["best"]
    gpt, t5 = found["gpt-100b"], found["t5-100b"]
    return (f"- Searching GPT-100B and T5-100B on 1024 A100s (global batch 1536, TP 4 or 8, selective or full "
            f"recompute, {ENCODER_DECODER_CANDIDATES} candidates each) agrees with "
            f"`examples/decoder-vs-encoder-decoder/`: GPT's best is {_layout(gpt)}, MFU {100 * gpt['mfu']:.1f}%; "
            f"T5's is {_layout(t5)}, MFU {100 * t5['mfu']:.1f}% ({gpt['mfu'] / t5['mfu']:.2f}x). "
            "tests/service/test_search_encoder_decoder.py checks the direction.")


def one_t() -> str:
    result = run_search(load_search_file(str(ONE_T)), max_candidates=ONE_T_CANDIDATES, workers=WORKERS)
    best, base = result["best"], result["baseline"]
    exposed = best["exposed_communication_s"]
    share = sum(exposed.values()) / best["iteration_time_s"]
    most = max(exposed, key=exposed.get).upper()
    return (f"- `clustersim search examples/gpt-1t-3072-a100.yaml --max-candidates {ONE_T_CANDIDATES}`: "
            f"{_counts(result['search'])}, {_stopped(result['search'])}. Best: {_layout(best)}: "
            f"{best['tokens_per_s']:,.0f} tokens/s, MFU {100 * best['mfu']:.1f}% (bubble "
            f"{100 * best['bubble_fraction']:.1f}%, exposed communication {100 * share:.1f}% of the iteration, "
            f"mostly {most}; "
            f"{best['memory']['headroom_gib']:.1f} GiB headroom), {best['tokens_per_s'] / base['tokens_per_s']:.2f}x "
            f"the published {_layout(base)} ({base['tokens_per_s']:,.0f} tokens/s, MFU {100 * base['mfu']:.1f}%).")


def render() -> str:
    return "\n".join(_wrap(bullet) for bullet in (gpt3(), encoder_decoder(), one_t()))


def main(argv: list[str]) -> int:
    """Without --check, write the block (it renders the searches once either way)."""
    block = render()
    flags = argv if "--check" in argv else [*argv, "--write"]
    path = holding(MARKERS[0])
    name = path.relative_to(ROOT)
    code = write_or_check_between(path, block, *MARKERS, flags)
    print((f"{name}'s search results are stale" if code else f"{name} carries the current search results")
          if "--check" in argv else f"wrote the search results into {name}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
