"""Where the documentation keeps a section or a generated block: README.md and the files of docs/.

The scripts that write generated blocks (bench/readme_checks.py, bench/readme_search.py, bench/accuracy_table.py,
bench/regenerate.py) and the tests that read the documentation find their text here, by marker or by heading, so a
section that moves from one file to another needs no change to them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
_HEADING = re.compile(r"^(#{1,6}) (.+)$")


def doc_files() -> list[Path]:
    """README.md, then docs/*.md in name order."""
    return [README, *sorted(DOCS.glob("*.md"))]


def holding(marker: str) -> Path:
    """The one documentation file whose text contains `marker`; ValueError when none or several do."""
    found = [path for path in doc_files() if marker in path.read_text(encoding="utf-8")]
    if len(found) != 1:
        where = ", ".join(str(p.relative_to(ROOT)) for p in found) or "no file"
        raise ValueError(f"{marker!r} should be in one documentation file (README.md, docs/*.md), found in {where}")
    return found[0]


def headings(text: str) -> list[tuple[int, int, str]]:
    """(line index, level, title) of every Markdown heading of `text`, code blocks skipped."""
    found, fenced = [], False
    for index, line in enumerate(text.split("\n")):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := _HEADING.match(line)):
            found.append((index, len(match[1]), match[2].strip()))
    return found


def section(title: str) -> tuple[Path, str]:
    """(file, text) of the section headed `title` in exactly one documentation file: from its heading to the next
    heading of the same or a higher level; ValueError when no file or several have it."""
    found = []
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        lines, marks = text.split("\n"), headings(text)
        for n, (index, level, name) in enumerate(marks):
            if name == title:
                end = next((i for i, lv, _ in marks[n + 1:] if lv <= level), len(lines))
                found.append((path, "\n".join(lines[index:end])))
    if len(found) != 1:
        raise ValueError(f"the heading {title!r} should be in one documentation file, found {len(found)}")
    return found[0]


def all_text() -> str:
    """Every documentation file's text, one after another, with runs of white space (line breaks included) read
    as one space: what a quoted phrase is looked for in."""
    return " ".join(" ".join(path.read_text(encoding="utf-8").split()) for path in doc_files())


def write_or_check(marker: str, table: str, current: Callable[[str], str], replace: Callable[[str, str], str],
                   what: str, check: bool) -> int:
    """Write `table` (a generated block, `what` names it) into the documentation file holding `marker`, or with
    `check` write nothing and return 1 if the file does not carry it; `current` reads the block from a file's text,
    `replace` puts one in."""
    path = holding(marker)
    name, text = path.relative_to(ROOT), path.read_text(encoding="utf-8")
    if check:
        fresh = current(text) == table
        print(f"{name} carries the current {what}" if fresh else f"{name}'s {what} is stale")
        return 0 if fresh else 1
    path.write_text(replace(text, table), encoding="utf-8")
    print(f"wrote the {what} into {name}")
    return 0
