"""Whole-process speed of the command line, as a user sees it: the median wall time of
`clustersim simulate examples/gpt-1t-3072-a100.yaml`, of `clustersim --help`, and of
`python -c "import simpy, json"` (the yardstick: a bare interpreter with a small library), each run N times
(default 5) interleaved in one bench run so that they share the machine's load; prints each median and the ratios.
The speed issue's goals: simulate at most 6x the yardstick, --help under 0.15 s.
Run:  python bench/startup.py [N]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
COMMANDS = {
    "yardstick (python -c 'import simpy, json')": [PYTHON, "-c", "import simpy, json"],
    "clustersim --help": [PYTHON, "-m", "service.cli.main", "--help"],
    "clustersim simulate examples/gpt-1t-3072-a100.yaml": [
        PYTHON, "-m", "service.cli.main", "simulate", str(ROOT / "examples" / "gpt-1t-3072-a100.yaml")],
}


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(runs):
        for name, command in COMMANDS.items():
            started = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
            times[name].append(time.perf_counter() - started)
    medians = {name: statistics.median(values) for name, values in times.items()}
    yardstick = medians[next(iter(COMMANDS))]
    for name, median in medians.items():
        print(f"{name}: median {median:.3f} s over {runs} runs ({median / yardstick:.1f}x the yardstick)")


if __name__ == "__main__":
    main()
