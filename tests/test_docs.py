"""The README stays short and leads to the rest: at most 200 lines, every file of docs/ linked from it, and every
relative link of README.md and docs/*.md (a file, and a heading in it where the link names one) resolves; the
README's example request is the example file's."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from bench_scripts import load

DOCS = load("doc_sections")
ROOT: Path = DOCS.ROOT
README: Path = DOCS.README
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
MAX_README_LINES = 200


def slug(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def links(path: Path) -> list[str]:
    """The link targets of a Markdown file, code blocks skipped."""
    found, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            found += LINK.findall(line)
    return found


def broken(path: Path) -> list[str]:
    """The relative links of `path` whose file, or heading in it, does not exist."""
    bad = []
    for target in links(path):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        if not resolved.exists() or anchor and (resolved.is_dir() or anchor not in {
                slug(title) for _, _, title in DOCS.headings(resolved.read_text(encoding="utf-8"))}):
            bad.append(target)
    return bad


def test_the_readme_is_at_most_200_lines() -> None:
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines: move the detail into a file of docs/"


def test_the_readme_links_every_docs_file() -> None:
    linked = {(README.parent / target.partition("#")[0]).resolve() for target in links(README)}
    assert sorted(p.name for p in DOCS.DOCS.glob("*.md") if p.resolve() not in linked) == []
    assert any(target.startswith("docs/") for target in links(README))


def test_every_relative_link_of_the_docs_resolves() -> None:
    found = {str(path.relative_to(ROOT)): bad for path in DOCS.doc_files() if (bad := broken(path))}
    assert found == {}


def test_the_link_check_catches_a_missing_file_and_heading(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("# B\n\n## Search and sweeps\n", encoding="utf-8")
    page = tmp_path / "a.md"
    page.write_text("[ok](b.md#search-and-sweeps) [no file](c.md) [no heading](b.md#compare)\n"
                    "```\n[in code](d.md)\n```\n", encoding="utf-8")
    assert broken(page) == ["c.md", "b.md#compare"]


def test_the_readme_request_is_the_example_file() -> None:
    block = re.search(r"```yaml\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert block is not None
    example = yaml.safe_load((ROOT / "examples" / "gpt-1t-3072-a100.yaml").read_text(encoding="utf-8"))
    assert yaml.safe_load(block[1]) == example


def test_a_section_is_found_by_its_heading_across_the_docs() -> None:
    path, text = DOCS.section("Python API")
    assert path == ROOT / "docs" / "usage.md"
    assert text.startswith("## Python API\n") and "\n## " not in text[1:]
