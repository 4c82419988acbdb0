"""Whole-process speed of the command line, as a user sees it: the median wall time of
`clustersim simulate examples/gpt-1t-3072-a100.yaml`, of `clustersim --help`, and of
`python -c "import simpy, json"` (the yardstick: a bare interpreter with a small library), each run N times
(default 5) interleaved in one bench run so that they share the machine's load; prints each median, its CPU time
(user + system, the steadier figure on a shared machine) and the ratios.
The goals: simulate at most 6x the yardstick, --help under 0.15 s.

Python as a user runs it: with its bytecode cache (an installed package's modules are compiled once, at install
or on first import, then read from __pycache__). An environment that sets PYTHONDONTWRITEBYTECODE (so that no
__pycache__ is written) would make every run compile clustersim's modules again while the yardstick's simpy,
installed from a wheel, keeps its compiled files: the commands run without it, after one untimed warm-up round
that writes the caches. `--no-bytecode-cache` measures the other way: every module compiled in every run.
Run:  python bench/startup.py [N] [--no-bytecode-cache]
"""

from __future__ import annotations

import os
import resource
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


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    cached = "--no-bytecode-cache" not in sys.argv
    runs = int(args[0]) if args else 5
    env = dict(os.environ)
    if cached:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for command in COMMANDS.values():  # the warm-up round: writes the bytecode caches
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=env)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    cpu: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(runs):
        for name, command in COMMANDS.items():
            cpu_before = _children_cpu()
            started = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=env)
            times[name].append(time.perf_counter() - started)
            cpu[name].append(_children_cpu() - cpu_before)
    medians = {name: statistics.median(values) for name, values in times.items()}
    cpu_medians = {name: statistics.median(values) for name, values in cpu.items()}
    first = next(iter(COMMANDS))
    yardstick, yardstick_cpu = medians[first], cpu_medians[first]
    print(f"bytecode cache: {'on (as Python runs by default)' if cached else 'off (every module compiled)'}")
    for name, median in medians.items():
        print(f"{name}: median {median:.3f} s over {runs} runs ({median / yardstick:.1f}x the yardstick); "
              f"CPU {cpu_medians[name]:.3f} s ({cpu_medians[name] / yardstick_cpu:.1f}x)")


if __name__ == "__main__":
    main()
