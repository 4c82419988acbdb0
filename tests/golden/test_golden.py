"""The bit-exact golden comparison as a test: each request document in golden.json is simulated again and its
result compared with the one stored (1e-9 relative; the figures are in fact reproduced to the bit).

golden.json is written by `python bench/golden_results.py --write-tests` from bench/golden_results.py's TEST_SET
(GPT and T5; 1F1B, GPipe, interleaved; ZeRO 0-3; full fidelity; ring, tree, hierarchical; a trace; search
candidates; steady states long enough to extrapolate, every schedule), and the comparison is that script's, so
the test and the full set agree on what "the same" means. The stored results are simulated period by period; where
the default run extrapolates periods (simcore/engine/steady_state/periodic.py) its result is compared with them within
1e-12 (bench/golden_results.py's extrapolation_differences), and run with `extrapolate: false` it must reproduce them.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from bench_scripts import load

CASES: dict[str, dict[str, Any]] = json.loads((Path(__file__).parent / "golden.json").read_text())


def _golden_script() -> ModuleType:
    module = load("golden_results")
    return module


GOLDEN = _golden_script()


def test_the_file_holds_the_test_set() -> None:
    assert sorted(name.split(" ")[0] for name in CASES) == sorted(GOLDEN.TEST_SET)


@pytest.mark.parametrize("name", sorted(CASES))
def test_result_is_unchanged(name: str) -> None:
    case = CASES[name]
    result, _events = GOLDEN.result_of(case["request"])
    stored = case["result"]
    assert result["simulator"]["extrapolated_periods"] == stored["simulator"]["extrapolated_periods"]
    if stored["simulator"]["extrapolated_periods"]:
        # stored: simulated period by period; the default run extrapolates: the same within 1e-12
        problems = GOLDEN.extrapolation_differences(stored, result)
        assert not problems, f"{name}: the extrapolated result differs from full simulation:\n  " + \
            "\n  ".join(problems[:10])
        return
    problems = GOLDEN.differences(stored, result)
    assert not problems, (
        f"{name}: the result differs from tests/golden/golden.json in {len(problems)} places, first:\n  "
        + "\n  ".join(problems[:10])
        + "\nA refactor must not change any figure. Only if this change of figures is intended, run "
        "`python bench/golden_results.py --write-tests` and say in the commit which figures change and why."
    )


EXTRAPOLATED = sorted(n for n, c in CASES.items() if c["result"]["simulator"]["extrapolated_periods"])


@pytest.mark.parametrize("name", EXTRAPOLATED)
def test_extrapolation_off_reproduces_the_stored_figures(name: str) -> None:
    case = CASES[name]
    result, _events = GOLDEN.result_of(case["request"], extrapolate=False)
    assert result["simulator"].pop("extrapolated_periods") == 0
    stored = dict(case["result"], simulator={k: v for k, v in case["result"]["simulator"].items()
                                              if k != "extrapolated_periods"})
    problems = GOLDEN.differences(stored, result)
    assert not problems, f"{name}: " + "\n  ".join(problems[:10])
