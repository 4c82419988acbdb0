"""Writes interop/data/deepspeed_keys.txt: the ds_config.json key names DeepSpeed defines, read from a checkout at
HEAD: every `NAME = "key"` string constant of deepspeed/**/constants.py and config*.py (how DeepSpeed names its
config keys), and the fields and aliases of its ZeRO config model (deepspeed/runtime/zero/config.py and
offload_config.py). A superset of the keys a section accepts: enough to refuse a misspelt key.

    python tests/interop/extract_deepspeed_keys.py /path/to/DeepSpeed > keys.txt
"""

from __future__ import annotations

import re
import subprocess
import sys


def keys(repo: str) -> list[str]:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=True).stdout

    names = [n for n in git("ls-tree", "-r", "HEAD", "--name-only", "deepspeed").split()
             if re.search(r"(constants|config[a-z_]*)\.py$", n)]
    found: set[str] = set()
    for name in names:
        text = git("show", f"HEAD:{name}")
        found |= set(re.findall(r"^[A-Z][A-Z0-9_]* = [\"']([a-z][a-z0-9_]*)[\"']\s*$", text, re.M))
        if name.startswith("deepspeed/runtime/zero/"):
            found |= set(re.findall(r"^    ([a-z][a-z0-9_]*): ", text, re.M))
            found |= set(re.findall(r"alias=[\"']([a-z][a-z0-9_]*)[\"']", text))
    return sorted(found)


if __name__ == "__main__":
    print("\n".join(keys(sys.argv[1])))
