"""The `clustersim` Python API: the example in docs/usage.md runs, results are the API's documents, invalid input names
the field, and the package imports the service layer only."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import clustersim
from service.cli.main import main

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

ROOT = Path(__file__).resolve().parents[2]
M8 = ROOT / "examples" / "bubble-vs-microbatches" / "m8.yaml"
SMALL = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
         "layout": {"dp": 2, "tp": 2, "pp": 2, "global_batch_size": 16}}


def docs_section(title: str) -> str:
    """The section `## title` of docs/usage.md, where the Python API is documented."""
    text = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end]


def test_the_docs_example_runs_and_prints_what_the_docs_show(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    section = docs_section("Python API")
    code = re.search(r"```python\n(.*?)```", section, re.S)
    shown = re.search(r"It prints[^\n]*\n\n```\n(.*?)```", section, re.S)
    assert code is not None and shown is not None
    monkeypatch.chdir(tmp_path)
    exec(compile(code[1], "usage.md", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out
    assert printed == shown[1], "docs/usage.md's printed figures are stale: paste what the example prints now"
    for name, magic in (("bubble-vs-m.svg", b"<?xml"), ("timeline.png", b"\x89PNG"), ("memory.svg", b"<?xml"),
                        ("compare.svg", b"<?xml")):
        assert (tmp_path / name).read_bytes().startswith(magic)


def test_the_one_line_call_works_in_a_fresh_interpreter(tmp_path: Path) -> None:
    line = re.search(r'python -c "(.*?)"\n', docs_section("Python API"))
    assert line is not None
    done = subprocess.run([sys.executable, "-c", line[1]], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) == clustersim.simulate(SMALL).iteration_time_s


def test_simulate_gives_the_document_the_cli_prints(capsys: pytest.CaptureFixture[str]) -> None:
    result = clustersim.simulate(M8)
    assert isinstance(result, clustersim.SimulationResult)
    assert main(["simulate", str(M8)]) == 0
    printed = json.loads(capsys.readouterr().out)
    mine = result.model_dump()
    for document in (mine, printed):
        document["simulator"].pop("wall_time_s")
    printed["trace"] = None  # the CLI writes its trace to a file; the document's field is then absent
    printed["training"] = None  # no training section in the request: the field is absent
    assert mine == printed
    assert clustersim.simulate(clustersim.request_from(M8)).iteration_time_s == result.iteration_time_s
    assert clustersim.simulate(str(M8)).iteration_time_s == result.iteration_time_s


@pytest.mark.parametrize(("request_", "field", "rule"), [
    ({**SMALL, "layout": {**SMALL["layout"], "tpp": 2}}, "layout.tpp", "unknown field"),
    ({**SMALL, "layout": {**SMALL["layout"], "tp": 4}}, "layout.dp", "must equal the number of GPUs"),
    ({**SMALL, "model": {"preset": "gpt-7"}}, "model.preset", "unknown model preset"),
    ("no/such/request.yaml", "file", "no such file"),
])
def test_invalid_input_names_the_field(request_: object, field: str, rule: str) -> None:
    with pytest.raises(clustersim.InvalidRequest) as info:
        clustersim.simulate(request_)
    assert (info.value.field, info.value.field) == (field, field) and rule in info.value.rule
    assert isinstance(info.value, ValueError) and str(info.value).startswith(f"{field}: ")
    with pytest.raises(TypeError, match="a request is a mapping"):
        clustersim.simulate(42)


def test_compare_sweep_and_plot_name_the_bad_field() -> None:
    bad = {**SMALL, "layout": {**SMALL["layout"], "zero_stage": 5}}
    with pytest.raises(clustersim.InvalidRequest) as info:
        clustersim.compare([SMALL, bad])
    assert info.value.field == "requests[1].layout.zero_stage"
    with pytest.raises(clustersim.InvalidRequest) as info:
        clustersim.sweep(SMALL, "layout.pipeline", [1, 2])
    assert info.value.field == "grid" and "'layout.pipeline'" in info.value.rule
    with pytest.raises(clustersim.InvalidRequest) as info:
        clustersim.plot(SMALL, kind="gantt")
    assert info.value.field == "kind"
    with pytest.raises(clustersim.InvalidRequest) as info:
        clustersim.plot(clustersim.simulate(SMALL))  # a timeline needs the trace
    assert info.value.field == "options.trace"
    with pytest.raises(clustersim.InvalidRequest) as info:
        clustersim.sweep(SMALL, "layout.global_batch_size", [16]).figures("warnings")
    assert info.value.field == "metric"
    with pytest.raises(clustersim.InvalidRequest) as info:  # valid documents, one breaks a domain rule
        clustersim.sweep(SMALL, "layout.tp", [2, 4])
    assert info.value.field == "layout.dp" and info.value.rule.endswith("(sweep value 4)")


def test_compare_sweep_and_search_give_the_api_documents() -> None:
    other = {**SMALL, "layout": {**SMALL["layout"], "dp": 8, "tp": 1, "pp": 1}}
    comparison = clustersim.compare({"pipelined": SMALL, "data parallel": other})
    assert [row.label for row in comparison.rows] == ["pipelined", "data parallel"]
    assert comparison.rows[0].iteration_time_s == clustersim.simulate(SMALL).iteration_time_s
    sweep = clustersim.sweep(SMALL, "layout.global_batch_size", [16, 32])
    samples = [r.samples_per_s * r.iteration_time_s for r in sweep.results]
    assert sweep.values == (16, 32) and samples == pytest.approx([16, 32])
    assert sweep.figures("iteration_time_s") == [r.iteration_time_s for r in sweep.results]
    found = clustersim.search({"model": SMALL["model"], "cluster": SMALL["cluster"], "global_batch_size": 16},
                              max_candidates=3, workers=1)
    assert found["search"]["simulated"] == 3 and found["best"]["rank"] == 1


def test_plot_of_a_traced_result_is_the_plot_of_its_request(tmp_path: Path) -> None:
    traced = clustersim.simulate({**SMALL, "options": {"trace": True}})
    clustersim.plot(traced, tmp_path / "from-result.svg")
    clustersim.plot(SMALL, tmp_path / "from-request.svg", title="Pipeline timeline")
    from_result = (tmp_path / "from-result.svg").read_text(encoding="utf-8")
    assert from_result.count('id="stage1-forward-mb') == 8  # m = 16 / dp 2 = 8 microbatches
    # the trace keeps times to the nanosecond; the boxes are the same ones
    ids = sorted(re.findall(r'id="(stage\d-[a-z_]+-[^"]+)"', from_result))
    assert ids == sorted(re.findall(r'id="(stage\d-[a-z_]+-[^"]+)"',
                                    (tmp_path / "from-request.svg").read_text(encoding="utf-8")))


def test_the_package_imports_the_service_layer_only() -> None:
    for path in (ROOT / "clustersim").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for name in names:
                    assert name.split(".")[0] in ("service", "__future__"), f"{path.name} imports {name}"
                    assert not any(part.startswith("_") for part in name.split(".")[1:]), name


def test_importing_the_api_leaves_matplotlib_until_a_picture_is_drawn() -> None:
    """`import clustersim` does not import matplotlib (about half a second); `plot` imports it when it draws."""
    code = ("import sys, clustersim; assert 'matplotlib' not in sys.modules; "
            "clustersim.plot({'model': {'preset': 'gpt3-1.3b'}, 'cluster': {'preset': 'dgx-a100', 'num_nodes': 1}, "
            "'layout': {'dp': 8, 'tp': 1, 'pp': 1, 'global_batch_size': 8}}, kind='breakdown'); "
            "assert 'matplotlib' in sys.modules")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode == 0
