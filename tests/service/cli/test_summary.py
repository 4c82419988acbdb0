"""What `clustersim simulate` and `clustersim presets` print: a summary and tables on a terminal (forced here with
--summary, or a real pseudo-terminal), the JSON document otherwise; and `simulate --strict`'s exit code on a layout
that does not fit in memory."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_cli

from api_schemas import load_request_file
from service import convert
from service.cli.simulate import DOES_NOT_FIT
from simcore import simulate

ROOT = Path(__file__).resolve().parents[3]
ONE_T = ROOT / "examples" / "gpt-1t-3072-a100.yaml"
FITS = ROOT / "examples" / "bubble-vs-microbatches" / "m8.yaml"  # GPT-3 13B on 64 A100s
NO_FIT = ROOT / "examples" / "no-pipeline-limits" / "gpt3-175b-zero1.yaml"  # 98.5 GiB per 80 GiB GPU
COLOUR = re.compile(r"\x1b\[[0-9;]*(?:3[0-7]|9[0-7]|38;)[0-9;]*m")  # an SGR sequence that sets a colour


def _without_wall_time(text: str) -> str:
    return re.sub(r'"wall_time_s": [0-9.e+-]+', '"wall_time_s": 0', text)


def _line(summary: str, label: str) -> str:
    found = [line for line in summary.splitlines() if line.startswith(label + "  ")]
    assert len(found) == 1, f"one {label!r} line expected in\n{summary}"
    return found[0]


def test_the_1t_summary_is_short_and_gives_the_json_figures(capsys: pytest.CaptureFixture[str]) -> None:
    code, summary, err = run_cli(capsys, "simulate", str(ONE_T), "--summary")
    assert (code, err) == (0, "")
    code, out, _ = run_cli(capsys, "simulate", str(ONE_T), "--json")
    assert code == 0
    result = json.loads(out)
    assert len(summary.splitlines()) < 30
    seconds = float(re.search(r"([0-9.]+) s", _line(summary, "iteration time")).group(1))  # type: ignore[union-attr]
    assert seconds == pytest.approx(result["iteration_time_s"], rel=5e-4)
    mfu = float(re.search(r"([0-9.]+)%", _line(summary, "MFU")).group(1))  # type: ignore[union-attr]
    assert mfu == pytest.approx(100 * result["mfu"], abs=0.05)
    assert "3072 x a100-80gb" in _line(summary, "cluster")
    assert "DP 6 x TP 8 x PP 64 x CP 1 x EP 1" in _line(summary, "layout")
    assert "ZeRO 0, recompute full, bf16" in _line(summary, "settings")
    assert f"{result['tokens_per_s']:,.0f} tokens/s" in _line(summary, "throughput")
    assert f"{100 * result['bubble_fraction']:.1f}%" in _line(summary, "bubble")
    exposed = _line(summary, "exposed comm")
    for kind in ("tp", "pp", "dp"):
        assert f"{kind} {result['time_breakdown_s'][kind + '_comm']:.4g} s" in exposed
    assert "zero 0 s" in _line(summary, "comm busy")
    memory = _line(summary, "memory")
    assert f"{result['memory']['peak_gib_per_gpu']:.1f} GiB" in memory and memory.endswith(": fits")
    assert result["warnings"] == [] and _line(summary, "warnings").endswith("none")
    assert "{" not in summary  # no JSON


def test_json_is_the_result_document_with_the_flag_or_on_a_pipe(capsys: pytest.CaptureFixture[str]) -> None:
    request = load_request_file(str(FITS))
    body = convert.to_response(simulate(convert.to_scenario(request)), request=request)
    document = _without_wall_time(json.dumps(body, indent=2, sort_keys=False) + "\n")
    for flags in (["--json"], []):  # capsys' stdout is not a terminal: JSON without a flag
        code, out, err = run_cli(capsys, "simulate", str(FITS), *flags)
        assert (code, err) == (0, "")
        assert _without_wall_time(out) == document


def test_strict_exits_does_not_fit_only_on_a_layout_that_does_not_fit(capsys: pytest.CaptureFixture[str]) -> None:
    assert DOES_NOT_FIT not in (0, 1, 2, 130)
    code, out, err = run_cli(capsys, "simulate", str(NO_FIT), "--strict")
    assert code == DOES_NOT_FIT
    assert json.loads(out)["memory"]["fits"] is False  # the result is printed all the same
    assert err.count("\n") == 1 and "does not fit in memory" in err and f"exit {DOES_NOT_FIT}" in err
    code, _, err = run_cli(capsys, "simulate", str(NO_FIT))  # said without --strict too, but not an error
    assert code == 0 and "does not fit in memory" in err
    code, out, err = run_cli(capsys, "simulate", str(FITS), "--strict")
    assert (code, err) == (0, "") and json.loads(out)["memory"]["fits"] is True


def test_a_summary_that_does_not_fit_says_so_with_the_warning(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "simulate", str(NO_FIT), "--summary", "--strict")
    assert code == DOES_NOT_FIT
    assert "does NOT fit" in _line(out, "memory")
    assert "dp+zero" in _line(out, "exposed comm")  # ZeRO 1: the exposed dp_comm carries ZeRO's traffic
    assert "18.5 GiB more than the 80 GiB" in _line(out, "warning")  # in fp16, as the example trains


def test_a_summary_names_each_node_group_and_the_training_run(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "simulate", str(ROOT / "examples" / "heterogeneous" / "mixed.yaml"), "--summary")
    assert code == 0
    assert "8 nodes of 8 a100-80gb + 8 nodes of 8 h100-80gb" in _line(out, "cluster")
    request = ROOT / "examples" / "cost-to-train" / "gpt-100b.yaml"
    code, out, _ = run_cli(capsys, "simulate", str(request), "--summary")
    assert code == 0
    _, document, _ = run_cli(capsys, "simulate", str(request), "--json")
    run = json.loads(document)["training"]["with_failures"]
    assert f"in {run['days']:.1f} days, {run['gpu_hours']:,.0f} GPU-hours" in _line(out, "training run")
    layout = yaml.safe_load(request.read_text(encoding="utf-8"))["layout"]  # (the example's searched best)
    assert f"DP {layout['dp']} x TP {layout['tp']} x PP {layout['pp']}" in _line(out, "layout")
    assert f"{layout['schedule']}, {layout['virtual_stages']} virtual stage" in _line(out, "layout")


def test_json_and_summary_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "simulate", str(FITS), "--json", "--summary")
    assert code == 2 and "not allowed with argument" in err


def test_presets_tables_on_a_forced_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "presets", "--summary")
    assert (code, err) == (0, "")
    catalog = convert.presets(None)
    for title in ("Model presets", "Cluster presets", "GPUs"):
        assert title in out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 2}
    assert set(catalog["models"]) | set(catalog["clusters"]) | set(catalog["gpus"]) <= set(rows)
    assert "1.01 T" in rows["gpt-1t"] and "175 B" in rows["gpt3-175b"] and "36+36" in rows["t5-100b"]
    assert "a100-80gb" in rows["dgx-a100"] and "rail_optimized" in rows["dgx-a100"]
    assert "989.4" in rows["h100-80gb"] and "1978.9" in rows["h100-80gb"]
    code, out, _ = run_cli(capsys, "presets", "gpus", "--summary")
    assert "GPUs" in out and "Model presets" not in out and "dgx-a100" not in out


def test_presets_json_unchanged_with_the_flag_or_on_a_pipe(capsys: pytest.CaptureFixture[str]) -> None:
    expected = json.dumps(convert.presets("clusters"), indent=2, sort_keys=False) + "\n"
    for flags in (["--json"], []):
        code, out, _ = run_cli(capsys, "presets", "clusters", *flags)
        assert code == 0 and out == expected


def _on_a_terminal(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run `clustersim ARGV` with stdout on a 120-column pseudo-terminal: (exit code, what the terminal got)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "service.cli.main", *argv], stdout=slave,
                            stderr=subprocess.DEVNULL, cwd=ROOT, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return proc.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


def _terminal_env(**extra: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES", "TERM")}
    return {**env, "TERM": "xterm-256color", **extra}


def test_a_terminal_gets_the_summary_in_colour_unless_no_color() -> None:
    code, shown = _on_a_terminal(["simulate", str(NO_FIT)], _terminal_env())
    assert code == 0 and "iteration time" in shown and '"iteration_time_s"' not in shown
    assert COLOUR.search(shown), "the layout that does not fit is shown in colour"
    code, shown = _on_a_terminal(["simulate", str(NO_FIT)], _terminal_env(NO_COLOR="1"))
    assert code == 0 and "does NOT fit" in shown
    assert not COLOUR.search(shown)


def test_a_terminal_gets_the_presets_tables() -> None:
    code, shown = _on_a_terminal(["presets", "clusters"], _terminal_env(NO_COLOR="1"))
    assert code == 0 and "Cluster presets" in shown and "gb200-nvl72" in shown and '"gpus_per_node"' not in shown
