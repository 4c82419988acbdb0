"""Regenerate every figure the repository ships from the current code, in dependency order, after a change that
moves results (each step is a script a test checks the output of):

1. with --fit: the cost model's fitted parameters (bench/fit_cost_model.py; minutes); HOST_OP_2021_S
   (simcore/cost/sharding.py) is refitted by hand with bench/fit_zero3_host.py, which prints it;
2. the golden results (bench/golden_results.py --write-tests);
3. the documentation's generated blocks, wherever they are (README.md, docs/*.md): the accuracy table
   (bench/accuracy_table.py), the MLPerf table (bench/mlperf_table.py), the `simulate` excerpt, Other checks,
   accuracy notes, `compare` example and FP8 validation (bench/readme_checks.py) and the search results
   (bench/readme_search.py);
4. every example's README and pictures (their own scripts);
5. the Python API example's printed output (docs/usage.md: run the example, paste what it prints).

Run from the repository root:  python bench/regenerate.py [--fit]
It stops at the first step that fails. What changed is for `git diff` to show and the commit to explain.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __spec__ is None:  # run as python bench/X.py, not python -m bench.X: the repository root first, as -m does
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.doc_sections import section

ROOT = Path(__file__).resolve().parent.parent
STEPS: list[list[str]] = [
    ["bench/golden_results.py", "--write-tests"],
    ["bench/accuracy_table.py"],
    ["bench/mlperf_table.py"],  # validate's MLPerf table (docs/accuracy.md)
    ["bench/readme_checks.py"],  # the simulate excerpt, "Other checks" and the other generated blocks
    ["bench/readme_search.py"],  # the search results (docs/search.md)
    ["examples/failures-at-scale/goodput.py"],
    ["examples/decoder-vs-encoder-decoder/report.py"],  # searches its best/ layouts again
    ["examples/pictures.py"],  # draws some of them (decoder-vs-encoder-decoder's timelines)
    ["examples/dp-scaling/scaling.py", "--write"],
    ["examples/fp8/report.py"],
    ["examples/cost-to-train/plan.py"],
    ["examples/stragglers/report.py"],
    ["examples/long-context/report.py", "--render"],  # from best/ (searching again: without --render)
    ["examples/zero-scaling/compare.py", "--write"],
    ["examples/no-pipeline-limits/report.py"],
    ["examples/hsdp/report.py"],
    ["examples/moe/report.py"],
    ["examples/pipeline-schedules/report.py"],
    ["examples/heterogeneous/report.py"],
    ["examples/fabrics/report.py"],
]


def python_api_block() -> None:
    """Run the Python API example in a scratch folder and paste what it prints below it."""
    path, found = section("Python API")
    text = path.read_text(encoding="utf-8")
    start = text.index(found)
    end = start + len(found)
    code = re.search(r"```python\n(.*?)```", found, re.S)
    shown = re.search(r"(It prints[^\n]*\n\n```\n)(.*?)```", found, re.S)
    if code is None or shown is None:
        raise SystemExit(f"{path.name}: no Python API example or printed block")
    out = io.StringIO()
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as scratch, contextlib.redirect_stdout(out):
        os.chdir(scratch)
        try:
            exec(compile(code[1], path.name, "exec"), {"__name__": "readme"})
        finally:
            os.chdir(here)
    found = found[:shown.start(2)] + out.getvalue() + found[shown.end(2):]
    path.write_text(text[:start] + found + text[end:], encoding="utf-8")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fit", action="store_true", help="refit the cost model's parameters first (minutes)")
    args = parser.parse_args(argv)  # --help prints this docstring and runs nothing; an unknown flag is exit 2
    steps = ([["bench/fit_cost_model.py"]] if args.fit else []) + STEPS
    for step in steps:
        started = time.perf_counter()
        done = subprocess.run([sys.executable, *step], cwd=ROOT, stdout=subprocess.DEVNULL)
        print(f"{' '.join(step)}: exit {done.returncode} in {time.perf_counter() - started:.0f} s", flush=True)
        if done.returncode != 0:
            return done.returncode
    python_api_block()
    print("the Python API example's printed block: rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
