"""Request errors: one (field, rule) pair per problem, and the contract's error JSON.

A field is a dotted path into the request document (``layout.tp``; list indexes as numbers); a rule is a
short, one-line sentence saying what the value must be (``must be >= 1``). ``str(err)`` is the one line the
CLI prints on stderr.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

__all__ = ["MAX_ECHO", "FieldError", "RequestError", "error_body", "from_validation_error", "printable"]

# The field named when the problem is the document as a whole (not a mapping, not YAML, ...).
WHOLE_REQUEST = "request"


# The longest field path and rule an error carries: a rule that quotes a value, or a field named by a key the
# client wrote, says at most this much of it.
MAX_ECHO = 1000


def printable(text: str, limit: int = MAX_ECHO) -> str:
    """`text` safe to encode as UTF-8 and bounded: a lone surrogate becomes its escape (``\\ud800``), and past
    `limit` characters the rest is cut and marked with an ellipsis."""
    if len(text) > limit:
        text = text[:limit] + "…"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem: the dotted path of the field and the rule its value breaks (both made `printable`)."""

    field: str
    rule: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "field", printable(self.field))
        object.__setattr__(self, "rule", printable(self.rule))


class RequestError(Exception):
    """An invalid request: every problem found, in document order (at least one)."""

    details: list[FieldError]

    def __init__(self, details: Iterable[FieldError]) -> None:
        found = tuple(details)
        if not found:
            found = (FieldError(WHOLE_REQUEST, "is invalid"),)
        # args holds the details so that the error pickles (process and Ray executors).
        super().__init__(found)
        self.details = list(found)

    @classmethod
    def for_field(cls, field: str, rule: str) -> RequestError:
        """An error with a single detail."""
        return cls([FieldError(field, rule)])

    def __str__(self) -> str:
        first = self.details[0]
        line = f"{first.field}: {first.rule}" if first.field else first.rule
        more = len(self.details) - 1
        return f"{line} (and {more} more)" if more else line


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _choices(expected: str) -> str:
    """Pydantic writes ``'a', 'b' or 'c'``; the rule lists ``'a', 'b', 'c'``."""
    head, sep, last = expected.rpartition(" or ")
    return f"{head}, {last}" if sep else expected


_FIXED_RULES: dict[str, str] = {
    "extra_forbidden": "unknown field",
    "missing": "is required",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "dict_type": "must be a mapping",
    "list_type": "must be a list",
    "invalid_key": "field names must be strings",
}

_BOUND_RULES: dict[str, tuple[str, str]] = {
    "greater_than_equal": ("ge", ">="),
    "greater_than": ("gt", ">"),
    "less_than_equal": ("le", "<="),
    "less_than": ("lt", "<"),
}


def _number(value: Any) -> str:
    """``0`` rather than ``0.0`` for a float bound that is a whole number."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _rule(error: ErrorDetails) -> str:
    kind = error["type"]
    ctx: dict[str, Any] = dict(error.get("ctx") or {})
    if kind in _FIXED_RULES:
        return _FIXED_RULES[kind]
    if kind in _BOUND_RULES and _BOUND_RULES[kind][0] in ctx:
        key, op = _BOUND_RULES[kind]
        return f"must be {op} {_number(ctx[key])}"
    if kind in ("literal_error", "enum") and "expected" in ctx:
        return f"must be one of {_choices(str(ctx['expected']))}"
    if kind == "json_invalid" and "error" in ctx:
        return _one_line(f"is not valid JSON: {ctx['error']}")
    message = error["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    return _one_line(message)


def _field(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or WHOLE_REQUEST


def _typos_first(errors: list[ErrorDetails]) -> list[FieldError]:
    """Details in pydantic's order, except that an unknown field whose name is close to a missing field of the
    same mapping comes first and says which one it probably meant: a misspelled name (``layuot``) also makes the
    field it meant missing, and the one line a user reads must name the typo, not its consequence. An unknown
    field like no missing one (a document of another kind, a stray key) keeps its place."""
    missing: dict[tuple[int | str, ...], list[str]] = {}
    for e in errors:
        if e["type"] == "missing" and e["loc"]:
            missing.setdefault(tuple(e["loc"][:-1]), []).append(str(e["loc"][-1]))
    typos, other = [], []
    for e in errors:
        close = []
        if e["type"] == "extra_forbidden" and e["loc"]:
            import difflib  # imported on an error only: a valid request does not pay for it

            close = difflib.get_close_matches(str(e["loc"][-1]), missing.get(tuple(e["loc"][:-1]), []), n=1)
        if close:
            typos.append(FieldError(_field(e["loc"]), f"{_rule(e)}; did you mean '{close[0]}'?"))
        else:
            other.append(FieldError(_field(e["loc"]), _rule(e)))
    return typos + other


def from_validation_error(exc: ValidationError) -> RequestError:
    """Convert every pydantic error into a (dotted field, one-line rule) detail, in pydantic's order but with a
    misspelled field name first (see `_typos_first`)."""
    return RequestError(_typos_first(exc.errors(include_url=False)))


def error_body(err: RequestError, code: str = "invalid_request") -> dict[str, Any]:
    """The contract's error JSON: ``{"error": {"code", "message", "details": [{"field", "rule"}]}}``."""
    return {
        "error": {
            "code": code,
            "message": str(err),
            "details": [{"field": d.field, "rule": d.rule} for d in err.details],
        }
    }
