"""Write the documentation's accuracy table (docs/accuracy.md, or wherever its markers are: bench/doc_sections.py
finds them) from `clustersim validate --json` (run here on the shipped reference rows, or
read from a file that command wrote).

Run:  python bench/accuracy_table.py [--from REPORT.json] [--check]
      --check: write nothing; exit 1 if the documentation does not carry the current table
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __spec__ is None:  # run as python bench/X.py, not python -m bench.X: the repository root first, as -m does
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.doc_sections import write_or_check
from simcore.calibration.accuracy import START_MARKER, current_section, render_markdown, replace_section
from simcore.calibration.validate import run_validation


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from", dest="source", help="a report written by clustersim validate --json")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    report = json.loads(Path(args.source).read_text(encoding="utf-8")) if args.source else run_validation()
    table = render_markdown(report)
    return write_or_check(START_MARKER, table, current_section, replace_section, "accuracy table", args.check)


if __name__ == "__main__":
    sys.exit(main())
