"""Draw the pictures that the examples' READMEs show, from simulations of the examples' request files.

    python examples/pictures.py            # rewrites the pictures beside the examples, and pictures.json
    python examples/pictures.py --out DIR  # writes them under DIR instead (same relative paths)

pictures.json records, for each picture, the SHA-256 of the file and of the simulated results it draws (the
result documents, traces included, less the wall time), and the matplotlib version that drew them.
tests/service/test_example_pictures.py simulates and draws them again and checks that the committed files are
current. Uses only the `clustersim` Python API.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

import matplotlib

import clustersim

EXAMPLES = Path(__file__).resolve().parent
BUBBLE = "bubble-vs-microbatches"
T5 = "decoder-vs-encoder-decoder"
MANIFEST = "pictures.json"


def traced(path: Path) -> clustersim.SimulationResult:
    """The request file simulated as a user's run is (the steady state extrapolated where it can be, the
    default), with its trace kept, so that the result can draw its timeline: the picture a user gets."""
    request = clustersim.request_from(path).model_dump(exclude_none=True, exclude_unset=True)
    request["options"] = {**request.get("options", {}), "trace": True}
    return clustersim.simulate(request)


def data_digest(results: list[clustersim.SimulationResult]) -> str:
    """SHA-256 of what a picture draws: its results, less the one field that varies between runs."""
    documents = [r.model_dump(exclude={"simulator": {"wall_time_s"}}) for r in results]
    return hashlib.sha256(json.dumps(documents, sort_keys=True).encode()).hexdigest()


def pictures() -> list[tuple[str, Any, list[clustersim.SimulationResult], dict[str, str]]]:
    """(file, what to plot, the results it draws, plot options) for every picture. The timelines have the
    default title (what `clustersim simulate FILE --plot` draws)."""
    out = []
    gpt13 = "GPT-3 13B on 64 A100s (TP 8 x PP 8, 1F1B, full recompute)"
    for m in (8, 64):
        result = traced(EXAMPLES / BUBBLE / f"m{m}.yaml")
        out.append((f"{BUBBLE}/timeline-m{m}.png", result, [result], {}))
    sweep = clustersim.sweep(EXAMPLES / BUBBLE / "m8.yaml", "layout.global_batch_size", [8, 16, 32, 64])
    out.append((f"{BUBBLE}/bubble-vs-m.png", sweep, list(sweep.results),
                {"metric": "bubble_fraction", "title": f"Bubble fraction against m (= global batch here): {gpt13}"}))
    gpt = traced(EXAMPLES / T5 / "best" / "long-pp-gpt.yaml")
    t5 = traced(EXAMPLES / T5 / "best" / "long-pp-t5-even.yaml")
    out.append((f"{T5}/timeline-gpt-pp.png", gpt, [gpt], {}))
    out.append((f"{T5}/timeline-t5-even-pp.png", t5, [t5], {}))
    # each label gets a second line naming the layout, the GPU and the precision (from the result's request)
    both = {"GPT-100B": gpt, "T5-100B, even split": t5}
    out.append((f"{T5}/compare-pp.png", both, [gpt, t5],
                {"title": "Iteration time by category, critical rank (2048 tokens a sample, 1024 A100s)"}))
    return out


def make(out: Path) -> dict[str, Any]:
    """Write every picture under `out` (paths relative to examples/) and return the manifest."""
    files: dict[str, dict[str, str]] = {}
    for name, subject, results, options in pictures():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        clustersim.plot(subject, out / name, **options)
        files[name] = {"file_sha256": hashlib.sha256((out / name).read_bytes()).hexdigest(),
                       "data_sha256": data_digest(results)}
    return {"matplotlib": matplotlib.__version__, "pictures": files}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=EXAMPLES, help="folder to write under (default: examples/)")
    args = parser.parse_args()
    manifest = make(args.out)
    (args.out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    for name in manifest["pictures"]:
        print(args.out / name)


if __name__ == "__main__":
    main()
