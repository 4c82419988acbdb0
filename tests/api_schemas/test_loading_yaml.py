"""Reading YAML (api_schemas.loading): with libyaml's parser where PyYAML has it, so that a large document costs
milliseconds, not seconds; a surrogate pair escaped as JSON writes it is still one character, a lone one is
refused by name; an escaped backslash before "u" is text."""

from __future__ import annotations

import time

import pytest
import yaml

import api_schemas.loading as loading
from api_schemas import RequestError
from api_schemas.loading import parse_document


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml")
def test_libyamls_parser_reads_the_documents() -> None:
    assert loading._Parser is not loading._PyParser
    started = time.process_time()
    for text in ("\n" * 980_000, "a: " + "x" * 980_000, "#" + "x" * 980_000 + "\nb: 1\n"):
        parse_document(text, "body", "yaml")
    assert time.process_time() - started < 0.5  # PyYAML's own parser: about 3 s of CPU for these


@pytest.mark.parametrize("syntax", ["yaml", None])
def test_an_escaped_surrogate_pair_is_one_character(syntax: str | None) -> None:
    assert parse_document('a: "fast \\ud83d\\ude00"\nb: "\\uD83D\\uDE00"\n', "body", syntax) == {
        "a": "fast \U0001f600", "b": "\U0001f600"}
    assert parse_document('a: "\\\\ud83d\\\\ude00"\n', "body", syntax) == {"a": "\\ud83d\\ude00"}


@pytest.mark.parametrize("text", ['a: "x \\ud800 y"\n', 'a: "\\udc00\\ud83d"\n', 'é: "ü \\ude00"\n'])
def test_a_lone_escaped_surrogate_is_refused_by_name(text: str) -> None:
    with pytest.raises(RequestError) as caught:
        parse_document(text, "body", "yaml")
    [detail] = caught.value.details
    assert detail.field == "request"
    assert detail.rule.startswith("holds a lone UTF-16 surrogate (an unpaired escape between \\ud800 and \\udfff)")
    assert "(line 1, column" in detail.rule
