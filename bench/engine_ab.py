"""A/B speed of two source trees on the same requests: this tree against another one (a `git worktree` of an
earlier commit, say), each request run as a whole `clustersim simulate` process from each tree in turn, so that
both share the machine's load; prints the median CPU time (user + system, the steadier figure on a shared
machine) and wall time of each, and the ratio this / other.

The requests: the 1T GPT on 3072 A100s (the README's example), a ZeRO 3 case heavy in calls at one instant
(examples/no-pipeline-limits/gpt3-175b-zero3.yaml) and a full-fidelity ZeRO 3 T5 with bucketed gathers. Both trees
run under this interpreter; each tree's own modules come first on the path (PYTHONPATH and the working directory).

Bytecode: the warm-up run of each request writes both trees' bytecode caches (__pycache__), as an installed
package has them; PYTHONDONTWRITEBYTECODE is dropped from the runs' environment for that, since with it set a
fresh worktree compiles every module of the project in every run (about 0.25 s of CPU a process on a 2-core
machine, more for the tree with more modules), which is not the engine's cost.

Run:  git worktree add /tmp/base <commit>;  python bench/engine_ab.py /tmp/base [N]
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
REQUESTS = ("examples/gpt-1t-3072-a100.yaml", "examples/no-pipeline-limits/gpt3-175b-zero3.yaml",
            "examples/zero-scaling/zero3-50m-gathers-1536.yaml")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(tree: Path, request: str) -> tuple[float, float]:
    """(CPU s, wall s) of one `clustersim simulate` process run from `tree`."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the caches are written once, by the warm-up (the docstring says why)
    cpu, wall = _children_cpu(), time.perf_counter()
    subprocess.run([sys.executable, "-m", "service.cli.main", "simulate", str(ROOT / request)], cwd=tree, env=env,
                   check=True, stdout=subprocess.DEVNULL)
    return _children_cpu() - cpu, time.perf_counter() - wall


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    other = Path(sys.argv[1]).resolve()
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    for request in REQUESTS:
        _run(ROOT, request), _run(other, request)  # warm-up: bytecode caches written
        figures: dict[str, list[tuple[float, float]]] = {"this": [], "other": []}
        for _ in range(runs):
            figures["this"].append(_run(ROOT, request))
            figures["other"].append(_run(other, request))
        med = {k: (statistics.median(c for c, _w in v), statistics.median(w for _c, w in v))
               for k, v in figures.items()}
        (cpu, wall), (cpu_o, wall_o) = med["this"], med["other"]
        print(f"{request}: this CPU {cpu:.3f} s (wall {wall:.3f}), other CPU {cpu_o:.3f} s (wall {wall_o:.3f}); "
              f"CPU ratio {cpu / cpu_o:.2f}x, wall ratio {wall / wall_o:.2f}x (medians of {runs})")


if __name__ == "__main__":
    main()
