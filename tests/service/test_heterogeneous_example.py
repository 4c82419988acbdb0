"""examples/heterogeneous: its README is current, and what it says holds: on 8 A100 and 8 H100 nodes the balanced
split beats the even one, the busy fractions show why, and replicas across GPU kinds run at the A100s' pace."""

from __future__ import annotations

from pathlib import Path

from conftest import load_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "heterogeneous" / "report.py"


def test_readme_is_current_and_the_balanced_split_wins() -> None:
    module = load_script(SCRIPT)
    results = module.cases()
    text = module.render()
    assert (SCRIPT.parent / "README.md").read_text(encoding="utf-8") == text, (
        "stale: run python examples/heterogeneous/report.py")
    even, balanced = results["mixed, even split"].metrics, results["mixed, balanced split"].metrics
    a100 = results["all A100 (16 DGX A100)"].metrics
    h100 = results["all H100 (16 DGX H100)"].metrics
    assert h100.iteration_time_s < balanced.iteration_time_s < even.iteration_time_s < a100.iteration_time_s
    # even: the A100 stages busy, the H100 stages idle half the time; balanced: every stage about as busy
    assert min(s.busy_fraction for s in even.stages[:2]) > 0.8 > 0.5 > max(s.busy_fraction for s in even.stages[2:])
    busy = [s.busy_fraction for s in balanced.stages]
    assert max(busy) - min(busy) < 0.15
    assert [s.layers["transformer"] for s in balanced.stages][2] > [s.layers["transformer"]
                                                                    for s in balanced.stages][0]
    across = results["mixed, replicas across kinds (tp,pp,dp)"]
    assert across.simulated_ranks == 16
    assert abs(across.metrics.iteration_time_s - a100.iteration_time_s) <= 1e-9 * a100.iteration_time_s


def test_the_docs_quote_the_example_as_it_is() -> None:
    results = load_script(SCRIPT).cases()
    even, balanced = results["mixed, even split"].metrics, results["mixed, balanced split"].metrics
    docs = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    ratio = even.iteration_time_s / balanced.iteration_time_s
    assert f"{ratio:.2f}x the even split's throughput" in " ".join(docs.split()), (
        "docs/usage.md's heterogeneous section is stale")
    layers = [s.layers["transformer"] for s in balanced.stages]
    assert min(layers[2:]) > 2 * max(layers[:2])  # "more than twice the layers"
    assert max(s.busy_fraction for s in even.stages[2:]) < 0.5  # "busy less than half the iteration"
