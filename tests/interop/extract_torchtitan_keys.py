"""Writes interop/data/torchtitan_keys.txt: every TOML key torchtitan's JobConfig accepts (`section.key`, nested
sections dotted: `quantize.linear.float8.enable_fsdp_float8_all_gather`), read from a torchtitan checkout's
torchtitan/config/job_config.py at a commit that still reads TOML files (the dataclass fields of JobConfig's
sections, recursively).

    python tests/interop/extract_torchtitan_keys.py /path/to/torchtitan COMMIT > keys.txt
"""

from __future__ import annotations

import ast
import subprocess
import sys


def keys(repo: str, commit: str) -> list[str]:
    source = subprocess.run(["git", "-C", repo, "show", f"{commit}:torchtitan/config/job_config.py"],
                            capture_output=True, text=True, check=True).stdout
    classes = {n.name: n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)}
    out: list[str] = []

    def walk(name: str, prefix: str) -> None:
        for stmt in classes[name].body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            annotation = ast.unparse(stmt.annotation)
            if annotation in classes:
                walk(annotation, f"{prefix}{stmt.target.id}.")
            else:
                out.append(prefix + stmt.target.id)

    walk("JobConfig", "")
    return sorted(out)


if __name__ == "__main__":
    print("\n".join(keys(sys.argv[1], sys.argv[2])))
