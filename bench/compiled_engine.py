"""What compiling the engine would buy: the event engine (simcore/engine/*.py) compiled to C extensions with mypyc
(the same source, so the pure-Python modules stay the fallback), against the source as it runs today.

Copies the working tree's tracked files to a temporary folder, compiles simcore/engine there (about a minute on
two cores; needs a C compiler, Python's headers and mypy, a test dependency), then times the 1T example's
simulation (bench/speed_1t.py's measure: CPU time of N simulations in one process) in the compiled copy and in the
source, rounds interleaved so that both share the machine's load, and checks both give the same iteration time
and event count. Prints each median and the ratio.
Run:  python bench/compiled_engine.py [N]      (N rounds of 3 simulations each, default 5)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEASURE = """
import json, time, gc
from api_schemas import load_request_file
from service.convert import to_scenario
from simcore.simulate import simulate
import simcore.engine.clock as clock
scenario = to_scenario(load_request_file("examples/gpt-1t-3072-a100.yaml"))
simulate(scenario)
gc.disable()
cpus = []
for _ in range(3):
    started = time.process_time()
    outcome = simulate(scenario)
    cpus.append(time.process_time() - started)
print(json.dumps({"cpu": min(cpus), "events": outcome.events, "time": outcome.metrics.iteration_time_s,
                  "compiled": clock.__file__.endswith(".so")}))
"""


def measure(tree: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", MEASURE], cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
                          capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder)
        files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        archive = subprocess.run(["tar", "-c", "--null", "-T", "-", "-f", "-"], cwd=ROOT, input=files,
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-f", "-"], cwd=copy, input=archive, check=True)
        engine = sorted(str(p.relative_to(copy)) for p in (copy / "simcore" / "engine").rglob("*.py"))
        subprocess.run([sys.executable, "-m", "mypyc", *engine], cwd=copy, check=True, capture_output=True)
        compiled: list[float] = []
        source: list[float] = []
        first: dict[str, float] = {}
        for _ in range(rounds):
            got = measure(copy)
            assert got["compiled"], "the copy imported the pure-Python engine"
            compiled.append(got["cpu"])
            plain = measure(ROOT)
            assert not plain["compiled"]
            source.append(plain["cpu"])
            first = first or {"events": plain["events"], "time": plain["time"]}
            assert (got["events"], got["time"]) == (plain["events"], plain["time"]), (got, plain)
    a, b = statistics.median(source), statistics.median(compiled)
    print(f"1T example, {int(first['events'])} events, iteration {first['time']:.6f} s in both")
    print(f"pure-Python engine: median CPU {a:.3f} s over {rounds} rounds (best of 3 each)")
    print(f"mypyc-compiled engine: median CPU {b:.3f} s ({a / b:.2f}x faster)")


if __name__ == "__main__":
    main()
