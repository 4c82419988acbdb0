"""An executor failure on the command line: a flag at fault is invalid input (exit 2, one line naming it); a
failure of the executor's own is an error (exit 1, one line), never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

from simcore.planning.executor import ExecutorError

ROOT = Path(__file__).resolve().parents[3]
SEARCH = ROOT / "examples" / "search" / "gpt3-175b-1024-a100.search.json"


@pytest.mark.parametrize(("error", "code", "said"), [
    (ExecutorError("cannot reach a Ray cluster at 'ray://10.0.0.1:10001': timed out", "address"), 2,
     "clustersim: invalid input: --address: cannot reach a Ray cluster"),
    (ExecutorError("a worker process of the local pool ended abruptly"), 1,
     "clustersim: executor failed: a worker process of the local pool ended abruptly"),
])
def test_executor_errors_exit_with_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                            error: ExecutorError, code: int, said: str) -> None:
    def failing(*_args: object, **_kwargs: object) -> None:
        raise error

    monkeypatch.setattr("service.search.run_search", failing)
    exit_code, out, err = run_cli(capsys, "search", str(SEARCH), "--max-candidates", "1")
    assert exit_code == code and out == ""
    assert err.startswith(said) and len(err.strip().splitlines()) == 1
