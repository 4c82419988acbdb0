"""Fit the cost model's free parameters on the calibration rows and write simcore/cost/fitted.py.

The fit itself (rows, objective, bounds, search) is simcore/calibration/fit.py; this script runs it, records the
code version it ran on, and writes the result as the module simcore.cost.parameters loads. Which sources are
fitted is an option (default: simcore.calibration.fit.FIT_SOURCES) and is written into the file, where
`clustersim validate` reads it.

Run:  python bench/fit_cost_model.py [--sources megatron20,mcore24] [--shape-model [--out PATH]] [--check]
      --check: write nothing; exit 1 if the shipped fit is stale (what tests/simcore/calibration runs)
      --shape-model: fit with the GEMM shape model on (simcore/cost/compute/gemm_shape.py; the shipped fit has it off)
      --out: write the module there instead of simcore/cost/fitted.py (to judge a fit before shipping it)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from service.provenance import package_version
from simcore.calibration.fit import FIT_SOURCES, fit_document, freshness_problems, render_module
from simcore.cost.fitted import FIT

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "simcore" / "cost" / "fitted.py"


def code_version() -> dict[str, str]:
    """The simulator's version and the git commit the fit ran on (with "-dirty" if the tree had changes)."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                                  check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""
    commit = git("rev-parse", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"simulator": package_version(), "git_commit": commit + ("-dirty" if dirty else "")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", default=",".join(FIT_SOURCES), help="comma-separated source prefixes")
    parser.add_argument("--check", action="store_true", help="only check that the shipped fit is fresh")
    parser.add_argument("--shape-model", action="store_true", help="fit with the GEMM shape model on")
    parser.add_argument("--out", type=Path, default=TARGET, help="where to write the fitted module")
    args = parser.parse_args()
    if args.check:
        problems = freshness_problems(FIT)
        print("\n".join(problems) if problems else "the shipped fit is fresh")
        return 1 if problems else 0
    started = time.perf_counter()
    document = fit_document(code_version(), tuple(args.sources.split(",")),
                            progress=lambda line: print(f"{time.perf_counter() - started:6.0f} s  {line}",
                                                        flush=True),
                            shape_model=args.shape_model)
    args.out.write_text(render_module(document), encoding="utf-8")
    print(f"mean |error| {document['mean_abs_error_pct']:.2f}% over {len(document['rows'])} calibration rows; "
          f"wrote {args.out} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
