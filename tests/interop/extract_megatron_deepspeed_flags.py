"""Writes interop/data/megatron_deepspeed_flags.txt: the command-line flags of a Megatron-DeepSpeed launch, read
from two checkouts at HEAD: every option string of an `add_argument` call in Megatron-DeepSpeed's
megatron/arguments.py (its own flags), and in DeepSpeed's deepspeed/__init__.py (`add_config_arguments`:
--deepspeed, --deepspeed_config, which Megatron-DeepSpeed's parser takes) and deepspeed/launcher/runner.py (the
`deepspeed` launcher's --num_nodes, --num_gpus, ...).

    python tests/interop/extract_megatron_deepspeed_flags.py /path/to/Megatron-DeepSpeed /path/to/DeepSpeed > flags.txt
"""

from __future__ import annotations

import ast
import subprocess
import sys

SOURCES = (("megatron", "megatron/arguments.py"), ("deepspeed", "deepspeed/__init__.py"),
           ("deepspeed", "deepspeed/launcher/runner.py"))


def _show(repo: str, path: str) -> str:
    return subprocess.run(["git", "-C", repo, "show", f"HEAD:{path}"], capture_output=True, text=True,
                          check=True).stdout


def _commit(repo: str) -> str:
    return subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def option_strings(text: str) -> set[str]:
    """Every `--name` literal passed positionally to an `add_argument` call."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            found |= {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                      and a.value.startswith("--")}
    return found


def flags(megatron_deepspeed: str, deepspeed: str) -> list[str]:
    repos = {"megatron": megatron_deepspeed, "deepspeed": deepspeed}
    found: set[str] = set()
    for repo, path in SOURCES:
        found |= option_strings(_show(repos[repo], path))
    return sorted(found)


if __name__ == "__main__":
    mds, ds = sys.argv[1], sys.argv[2]
    print("# Megatron-DeepSpeed launch flags: megatron/arguments.py at github.com/microsoft/Megatron-DeepSpeed "
          f"commit {_commit(mds)},\n# and deepspeed/__init__.py (add_config_arguments) and "
          f"deepspeed/launcher/runner.py at github.com/microsoft/DeepSpeed commit {_commit(ds)}.\n"
          "# Written by tests/interop/extract_megatron_deepspeed_flags.py.")
    print("\n".join(flags(mds, ds)))
