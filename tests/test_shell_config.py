"""bench/shell_config.py: the variables a submission's config script sets, as bash would leave them, with `if`
blocks taken by their simple conditions and skipped, every branch, where a condition cannot be evaluated."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from bench_scripts import load

shell_config = load("shell_config")

# the shape of NVIDIA's v4.1 gpt3 config (mlcommons/training_results_v4.1 NVIDIA/benchmarks/gpt3/implementations/
# eos_n64_ngc24.09_nemo/config_DGXH100_64x8x128x4x8_mbs2.sh), its sourced files beside it
FILES = {
    "impl/config.sh": """## DL params
export MINIBS="${MINIBS:=128}"
export TENSOR_MODEL_PARALLEL=4   #  training.model.tensor_model_parallel_size
if [[ "${MLPERF_VERSION:-}" == "v31" ]]; then
    source $(dirname ${BASH_SOURCE[0]})/config_common_v31.sh
else
    source $(dirname ${BASH_SOURCE[0]})/config_common.sh
fi
export MICRO_BATCH_SIZE=2
if [ $MINIBS -eq 128 ];  then
    export VBOOST_VALUE=1
fi
if [[ $(($MINIBS % TENSOR_MODEL_PARALLEL)) != 0 ]]; then
    export BROKEN=1
fi
if [[ "${UNSET_FLAG}" -eq 1 ]]; then
  export A=one
elif [[ -n "${MINIBS}" && "${MICRO_BATCH_SIZE}" -gt 1 ]]; then
  export A=two
  if [[ "$LOGBASE" == *'_'* ]]; then
    export B=glob
  fi
else
  export A=three
fi
if [ "${UNSET_FLAG}" -lt 1 ]; then
  export C=yes
else
  export C=no
fi
unset GONE
""",
    "impl/config_common.sh": """export BUCKET_CAP_MB=200
export FP8_PARAMS=True
export GONE=1
: "${LOAD_MINIMAL_NUM_SAMPLES:=0}"
if [[ "${LOAD_MINIMAL_NUM_SAMPLES}" -eq 1 ]]; then
  export MAX_STEPS=500
fi
""",
    "impl/config_common_v31.sh": "export FP8_PARAMS=False\nexport V31=1\n",
}
EXPECTED = {"MINIBS": "128", "TENSOR_MODEL_PARALLEL": "4", "BUCKET_CAP_MB": "200", "FP8_PARAMS": "True",
            "LOAD_MINIMAL_NUM_SAMPLES": "0", "MICRO_BATCH_SIZE": "2", "VBOOST_VALUE": "1", "A": "two", "C": "no"}


def _env() -> dict[str, str]:
    def include(script: str, name: str) -> str | None:
        path = f"{script.rsplit('/', 1)[0]}/{name}"
        return path if path in FILES else None
    return shell_config.shell_env(FILES.get, "impl/config.sh", include=include)


def test_conditions_taken_as_bash_takes_them() -> None:
    env = _env()
    # the else branch sources config_common.sh (MLPERF_VERSION unset), not the v31 file; `[ $MINIBS -eq 128 ]` holds;
    # `[[ "" -eq 1 ]]` is false (0) and the elif's && holds; `[ "" -lt 1 ]` fails in bash (not an integer): else
    assert env == EXPECTED
    # what cannot be evaluated is skipped whole: the $((...)) test, the glob inside the taken elif
    assert "BROKEN" not in env and "B" not in env and "V31" not in env and "GONE" not in env


def test_a_set_variable_changes_the_branch() -> None:
    env = shell_config.shell_env(FILES.get, "impl/config.sh", env={"MLPERF_VERSION": "v31", "UNSET_FLAG": "1"},
                                 include=lambda script, name: f"impl/{name}")
    assert env["V31"] == "1" and env["FP8_PARAMS"] == "False" and "BUCKET_CAP_MB" not in env
    assert env["A"] == "one" and env["C"] == "no"


@pytest.mark.parametrize(("text", "expected"), [
    ('[[ "${X:-}" == "v31" ]]', False), ('[[ "${Y}" == "b" ]]', True), ("[ $N -gt 2 ] && [[ -z \"$X\" ]]", True),
    ('[[ -n "${X}" ]] || [[ "${N}" -le 3 ]]', True), ("[[ ${N} -ne 3 ]]", False), ('[[ "$Y" != b ]]', False),
    ("[[ -f /etc/passwd ]]", None), ('[[ "$(hostname)" == x ]]', None), ("[[ $N == 3* ]]", None),
])
def test_one_condition(text: str, expected: bool | None) -> None:
    assert shell_config.condition(text, {"Y": "b", "N": "3"}) is expected


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash to compare with")
def test_bash_agrees_on_the_variables_it_sets(tmp_path: pytest.TempPathFactory) -> None:
    """Where every condition can be evaluated, bash itself leaves the same variables (the $((...)) and glob
    blocks, which it evaluates and this module skips, are left out)."""
    folder = tmp_path / "impl"  # type: ignore[operator]
    folder.mkdir()
    for path, text in FILES.items():
        text = "\n".join(line for line in text.split("\n") if "$((" not in line)
        text = text.replace('  if [[ "$LOGBASE" == *\'_\'* ]]; then\n    export B=glob\n  fi\n', "")
        text = text.replace("    export BROKEN=1\nfi\n", "")
        (tmp_path / path).write_text(text)  # type: ignore[operator]
    names = " ".join(sorted(set(EXPECTED) | {"BROKEN", "B", "V31", "GONE"}))
    script = f'source impl/config.sh; for n in {names}; do [[ -v $n ]] && echo "$n=${{!n}}"; done'
    out = subprocess.run(["env", "-i", "bash", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout
    assert dict(line.split("=", 1) for line in out.split()) == EXPECTED
