"""The error every builder raises for bad input: it names the field and the rule it broke."""

from __future__ import annotations


class SpecError(ValueError):
    """Invalid input. `field` is the request path (e.g. ``layout.tp``); `rule` says what must hold."""

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule
