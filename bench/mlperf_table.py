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

from bench.doc_sections import write_or_check
from service.mlperf_table import START_MARKER, current_section, render_markdown, replace_section, run_mlperf_validation


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    table = render_markdown(run_mlperf_validation())
    return write_or_check(START_MARKER, table, current_section, replace_section, "MLPerf table", args.check)


if __name__ == "__main__":
    sys.exit(main())
