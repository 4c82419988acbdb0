"""Write the documentation's MLPerf table (docs/accuracy.md, wherever its markers are: bench/doc_sections.py finds
them) from the MLPerf part of `clustersim validate` (service/mlperf_table.py), run here on the shipped runs.

Run:  python bench/mlperf_table.py [--check]
      --check: write nothing; exit 1 if the documentation does not carry the current table
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __spec__ is None:  # run as python bench/X.py, not python -m bench.X: the repository root first, as -m does
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.doc_sections import ROOT, holding
from service.mlperf_table import START_MARKER, current_section, render_markdown, replace_section, run_mlperf_validation


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    table = render_markdown(run_mlperf_validation())
    path = holding(START_MARKER)
    name, text = path.relative_to(ROOT), path.read_text(encoding="utf-8")
    if args.check:
        fresh = current_section(text) == table
        print(f"{name} carries the current MLPerf table" if fresh else f"{name}'s MLPerf table is stale")
        return 0 if fresh else 1
    path.write_text(replace_section(text, table), encoding="utf-8")
    print(f"wrote the MLPerf table into {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
