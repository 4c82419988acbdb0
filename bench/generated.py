"""Files written from figures the code computes (example READMEs, the docs' generated blocks): write them, or
check that they are current. README tooling of the repository, beside the scripts that use it: setuptools does not
ship bench/, and the example scripts import it as `bench.generated` (from the repository root, see bench/__init__.py).

Each example's report script renders its README from fresh simulations and ends in `write_or_check`; its test
runs the script with `--check`, so a README whose figures no longer match the code fails CI.
"""

from __future__ import annotations

from pathlib import Path


def write_or_check(path: Path, text: str, argv: list[str], command: str) -> int:
    """With `--check` in argv: 0 if `path` holds exactly `text`, else 1 with a line naming `command` to rerun.
    Otherwise write `text` to `path`, print it and return 0."""
    if "--check" in argv:
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != text:
            print(f"{path.parent.name}/{path.name} is stale: run {command}")
            return 1
        return 0
    path.write_text(text, encoding="utf-8")
    print(text)
    return 0


def between_markers(text: str, block: str, begin: str, end: str) -> str:
    """`text` with what lies between the lines `begin` and `end` replaced by `block`; ValueError naming the marker
    that is missing."""
    for marker in (begin, end):
        if marker not in text:
            raise ValueError(f"no marker {marker!r}")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{block}\n{end}{tail}"


def write_or_check_between(path: Path, block: str, begin: str, end: str, argv: list[str]) -> int:
    """With `--check` in argv: 0 if `path` carries `block` between the markers, else 1. With `--write`: put it
    there and return 0. Otherwise leave `path` alone and return 0."""
    text = path.read_text(encoding="utf-8")
    fresh = between_markers(text, block, begin, end)
    if "--check" in argv:
        return 0 if fresh == text else 1
    if "--write" in argv:
        path.write_text(fresh, encoding="utf-8")
    return 0
