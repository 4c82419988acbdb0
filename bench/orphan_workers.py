"""Do a search's worker processes end with it? Starts `clustersim search` on Llama-3-70B over 32 DGX H100 nodes
(each candidate takes many seconds) with 2 local workers, waits until both workers are simulating, then ends the
search the way a CI timeout, the out-of-memory killer or a user would, and times how long the last process it
started (workers, and the forkserver where there is one) lives on.

    python bench/orphan_workers.py [--rounds N] [--ways WAY,...]

Ways of ending it, each `--rounds` times (default 3):
- sigkill: SIGKILL to the `clustersim search` process (its pool forks: the CLI has no other thread then);
- sigkill-forkserver: SIGKILL to a Python process that runs the same search with another thread alive, so its
  pool starts workers from a forkserver (workers are the forkserver's children, not the search's);
- sweep-sigkill: SIGKILL to `clustersim sweep` on four slow points (the sweep's pool is the search's);
- ctrl-c: SIGINT to the whole process group, as a terminal's Ctrl-C sends it;
- sigint-parent: SIGINT to the search process alone;
- ray-sigkill, ray-ctrl-c: the same search with `--executor ray` (a local Ray runtime of its own: its keeper, the
  GCS server, raylet, dashboard, monitors, agents and task workers), killed or interrupted once two Ray workers run
  its tasks. Skipped (said so) where ray is not installed.
Prints, per way, the seconds from the signal until the last process the search started was gone, and until
the search itself had exited too (the goal: both under 2 s), then `ps` of any clustersim process still running
2 s after the last round (the goal: none).

Processes are read from /proc (Linux), so nothing beyond the project is needed. tests/service/cli/
test_orphan_workers.py runs `measure` once per way and asserts the goal.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The space is narrowed so that planning takes about a second; its first candidates take tens of seconds each.
REQUEST: dict[str, Any] = {
    "model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 32}, "global_batch_size": 512,
    "space": {"tp": [8], "pp": [2, 4, 8], "zero_stage": [1], "recompute": ["selective"], "sequence_parallel": [True]},
}
WORKERS = 2
BUSY_CPU_S = 0.5  # a worker counts as simulating once it has used this much CPU
# A sweep of the search's first four candidates (context parallelism over 16 GPUs: tens of seconds each).
SWEEP: dict[str, Any] = {
    "base": {"model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 32},
             "layout": {"dp": 1, "tp": 8, "pp": 2, "cp": 16, "virtual_stages": 2, "microbatch_size": 4,
                        "global_batch_size": 512, "schedule": "interleaved_1f1b", "zero_stage": 1,
                        "recompute": "selective", "sequence_parallel": True}},
    "grid": {"layout.virtual_stages": [2, 4], "layout.microbatch_size": [4, 8]},
}
# The same search from a process that has another thread alive: the local pool then starts a forkserver.
THREADED = """
import sys, threading
threading.Thread(target=threading.Event().wait, daemon=True).start()
from service.search import run_search
from api_schemas.search import load_search_file
run_search(load_search_file(sys.argv[1]), workers=int(sys.argv[2]))
"""
WAYS = ("sigkill", "sigkill-forkserver", "sweep-sigkill", "ctrl-c", "sigint-parent", "ray-sigkill", "ray-ctrl-c")
# The titles Ray workers take while they run the search's tasks (planning slices, then candidates).
RAY_TASKS = ("ray::plan_slice", "ray::evaluate_candidate")


@dataclass(frozen=True, slots=True)
class Proc:
    """A process as /proc shows it: its pid and its start time (clock ticks since boot), which tell it from a
    later process that reuses the pid."""

    pid: int
    start_ticks: int


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None if there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return text[text.rindex(")") + 2:].split()


def alive(proc: Proc) -> bool:
    """The process exists, is not a zombie (killed but not yet reaped) and is the same one."""
    fields = _stat(proc.pid)
    return fields is not None and fields[0] not in ("Z", "X") and int(fields[19]) == proc.start_ticks


def title(pid: int) -> str:
    """A process's command line as it shows itself (a Ray worker renames itself to the task it runs)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def cpu_s(pid: int) -> float:
    """User plus system CPU seconds of a process (0 if it is gone)."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields else 0.0


def descendants(pid: int) -> list[Proc]:
    """Every living process below `pid` (children, their children, ...)."""
    children: dict[int, list[Proc]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None and fields[0] not in ("Z", "X"):
                children.setdefault(int(fields[1]), []).append(Proc(int(entry), int(fields[19])))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child.pid)
    return out


def start(way: str, request: Path) -> subprocess.Popen[bytes]:
    """The search (or the sweep), in a session of its own (so Ctrl-C can be sent to its process group alone)."""
    if way == "sigkill-forkserver":
        argv = [sys.executable, "-c", THREADED, str(request), str(WORKERS)]
    elif way == "sweep-sigkill":
        sweep = request.with_name("sweep.json")
        sweep.write_text(json.dumps(SWEEP), encoding="utf-8")
        argv = [sys.executable, "-m", "service.cli.main", "sweep", str(sweep), "--workers", str(WORKERS),
                "--out", str(request.with_name("sweep-out"))]
    else:
        argv = [sys.executable, "-m", "service.cli.main", "search", str(request), "--workers", str(WORKERS),
                "--json"] + (["--executor", "ray"] if way.startswith("ray-") else [])
    with stderr_file(request).open("wb") as stderr:
        return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
                                preexec_fn=terminal_sigint)


def stderr_file(request: Path) -> Path:
    """Where the search's standard error goes (beside its request)."""
    return request.with_name("stderr.txt")


def terminal_sigint() -> None:
    """In the child before it runs: SIGINT as a terminal's shell leaves it (its default). A process that ignores
    SIGINT passes that on to what it starts, and a Python started with SIGINT ignored never raises
    KeyboardInterrupt: in CI's whole test run the runner's SIGINT had come to be ignored by the time these tests
    ran (which earlier test leaves it so is not known yet)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def busy_workers(parent: subprocess.Popen[bytes], deadline_s: float, ray: bool = False,
                 stderr: Path | None = None) -> list[Proc]:
    """Wait until WORKERS processes below `parent` are simulating (with `ray`: Ray workers running the search's
    tasks, since Ray's own processes use CPU too); every process below it then. Raises TimeoutError past `deadline_s`
    seconds, or RuntimeError if the search ended first (with the end of `stderr`, the search's standard error)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if parent.poll() is not None:
            said = stderr.read_text(errors="replace").strip()[-2000:] if stderr is not None else ""
            raise RuntimeError(f"the search ended (exit {parent.returncode}) before its workers were busy: {said}")
        below = descendants(parent.pid)
        if sum(cpu_s(p.pid) >= BUSY_CPU_S and (not ray or title(p.pid).startswith(RAY_TASKS))
               for p in below) >= WORKERS:
            return below
        time.sleep(0.1)
    raise TimeoutError(f"no {WORKERS} busy workers within {deadline_s:g} s")


@dataclass(frozen=True, slots=True)
class Ending:
    """What one ending measured: the processes the search had started, the seconds from the signal until the
    last of them was gone and until the search itself had exited too (None: past the deadline), those still
    alive then, and the search's exit status."""

    started: int
    workers_s: float | None
    seconds: float | None
    left: list[int]
    exit_code: int | None


def measure(way: str, request: Path, deadline_s: float = 30.0, start_deadline_s: float = 300.0) -> Ending:
    """Start the search, wait for busy workers, end it `way` (WAYS) and time it until its processes are gone,
    polling every 10 ms for up to `deadline_s` seconds."""
    parent = start(way, request)
    below: list[Proc] = []
    try:
        below = busy_workers(parent, start_deadline_s, way.startswith("ray-"), stderr_file(request))
        signalled = time.monotonic()
        if "sigkill" in way:
            parent.kill()
        elif way.endswith("ctrl-c"):
            os.killpg(parent.pid, signal.SIGINT)
        else:
            parent.send_signal(signal.SIGINT)
        end, workers_s = signalled + deadline_s, None
        while time.monotonic() < end:
            parent.poll()  # reap it when it exits, so that it does not count as alive
            if workers_s is None and not any(alive(p) for p in below):
                workers_s = time.monotonic() - signalled
            if workers_s is not None and parent.returncode is not None:
                return Ending(len(below), workers_s, time.monotonic() - signalled, [], parent.returncode)
            time.sleep(0.01)
        return Ending(len(below), workers_s, None, [p.pid for p in below if alive(p)], parent.poll())
    finally:  # leave nothing behind, whatever was measured
        below += descendants(parent.pid)
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for proc in below:
            if alive(proc):
                os.kill(proc.pid, signal.SIGKILL)


def request_file(directory: Path) -> Path:
    """The benchmark's search request, written to `directory`."""
    path = directory / "llama3-70b-32-dgx-h100.search.json"
    path.write_text(json.dumps(REQUEST), encoding="utf-8")
    return path


def clustersim_processes() -> str:
    """`ps` lines of processes running clustersim code (the CLI, a forkserver or a pool worker of it)."""
    lines = subprocess.run(["ps", "-eo", "pid,ppid,stat,pcpu,etime,args"], capture_output=True, text=True,
                           check=False).stdout.splitlines()
    own = {os.getpid(), os.getppid()}
    hits = [line for line in lines[1:] if ("clustersim" in line or "service.search" in line or "simcore" in line
                                            or "multiprocessing" in line or "ray::" in line or "/ray/" in line)
            and int(line.split()[0]) not in own]
    return "\n".join(lines[:1] + hits) if hits else "(none)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ways", default=",".join(WAYS), help=f"comma-separated, of: {', '.join(WAYS)}")
    args = parser.parse_args()
    ways = [way for way in args.ways.split(",") if way]
    if unknown := sorted(set(ways) - set(WAYS)):
        parser.error(f"--ways: unknown {', '.join(unknown)}; must be of {', '.join(WAYS)}")
    print(f"Llama-3-70B on 32 DGX H100 nodes, {WORKERS} workers; seconds from the signal until the last process "
          "the search started was gone / until the search itself had exited too")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        request = request_file(Path(tmp))
        for way in ways:
            if way.startswith("ray-") and importlib.util.find_spec("ray") is None:
                print(f"  {way:19s} skipped: ray is not installed (pip install 'clustersim[ray]')")
                continue
            figures = []
            for _ in range(args.rounds):
                ending = measure(way, request)
                if ending.seconds is None:
                    figures.append(f"LEFT {ending.left}")
                    worst = float("inf")
                else:
                    figures.append(f"{ending.workers_s:.3f} / {ending.seconds:.3f}")
                    worst = max(worst, ending.seconds)
            print(f"  {way:19s} {ending.started} processes, exit {ending.exit_code}: " + "; ".join(figures))
    time.sleep(2.0)
    print("clustersim processes 2 s after the last round:")
    print(clustersim_processes())
    print(f"slowest: {worst:.3f} s (goal: under 2 s)")
    return 0 if worst < 2.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
