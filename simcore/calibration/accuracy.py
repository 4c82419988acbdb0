"""The documentation's accuracy table, written from a `clustersim validate --json` report (bench/accuracy_table.py
puts it in docs/accuracy.md between the markers below; tests/simcore/calibration/test_readme_accuracy.py checks
that the documentation carries the table of the current code)."""

from __future__ import annotations

from typing import Any

START_MARKER = "<!-- accuracy-table: written by python bench/accuracy_table.py; do not edit by hand -->"
END_MARKER = "<!-- accuracy-table: end -->"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _part(stats: dict[str, Any]) -> str:
    if not stats["rows"]:
        return "- | - | -"
    return f"{stats['rows']} | {_pct(stats['mean_abs_error_pct'])} | {_pct(stats['max_abs_error_pct'])}"


def render_markdown(report: dict[str, Any]) -> str:
    """Per reference file, per source and per source group: rows, mean and max |error| % for the rows fitted and
    the rows not fitted; then every row. Figures rounded to 0.1 point."""
    lines = [
        f"Fitted on the sources: {', '.join(report['fitted_sources'])} (simcore/cost/fitted.py).",
        "",
        "| reference file, source or group | fitted rows | mean \\|error\\| % | max % | rows not fitted "
        "| mean \\|error\\| % | max % |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, key in (("file", "by_reference"), ("source", "by_source"), ("group", "by_group")):
        for name, parts in report[key].items():
            lines.append(f"| {label} `{name}` | {_part(parts['fitted'])} | {_part(parts['not_fitted'])} |")
    lines += [
        "",
        f"All rows not fitted: mean |error| {_pct(report['mean_abs_error_pct'])}%, max "
        f"{_pct(report['max_abs_error_pct'])}%.",
        "",
        "| case | measured s | predicted s | error % | fitted |",
        "|---|---|---|---|---|",
    ]
    for case in report["cases"]:
        lines.append(f"| `{case['id']}` | {case['measured_s']:.3f} | {case['predicted_s']:.3f} | "
                     f"{case['error_pct']:+.1f} | {'yes' if case['calibration'] else 'no'} |")
    if report["skipped"]:  # rows grouped by their reason, in the report's order
        reasons: dict[str, list[str]] = {}
        for skipped in report["skipped"]:
            reasons.setdefault(skipped["reason"], []).append(f"`{skipped['id']}`")
        lines += ["", "Skipped:"] + [f"- {', '.join(ids)}: {reason.rstrip('.')}." for reason, ids in reasons.items()]
    return "\n".join(lines)


def replace_section(readme: str, table: str) -> str:
    """`readme` (a documentation file's text) with the text between the markers replaced by `table`; ValueError
    if the markers are missing."""
    start, end = readme.find(START_MARKER), readme.find(END_MARKER)
    if start < 0 or end < start:
        raise ValueError("the text has no accuracy-table markers")
    return readme[:start + len(START_MARKER)] + "\n" + table + "\n" + readme[end:]


def current_section(readme: str) -> str:
    start, end = readme.find(START_MARKER), readme.find(END_MARKER)
    if start < 0 or end < start:
        raise ValueError("the text has no accuracy-table markers")
    return readme[start + len(START_MARKER):end].strip("\n")
