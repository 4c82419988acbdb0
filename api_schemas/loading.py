"""Reading a request document from text or a file (YAML, which includes JSON) and validating it.

Beyond plain YAML: a key given twice is an error (a silently overridden field is a hidden typo), field names
must be strings (YAML reads a bare ``on:`` as a bool), and ``1e9`` is a number, as in JSON. JSON that YAML
cannot read (tab indentation) is read as JSON. This module is the package's only I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml
from pydantic import ValidationError

from api_schemas.errors import WHOLE_REQUEST, RequestError, from_validation_error
from api_schemas.request import SimulationRequest

__all__ = ["load_request_file", "parse_document", "parse_request"]

_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads exponent floats without a dot or exponent sign (``1e9``, ``2.5e3``)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _where(mark: Any) -> str:
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def _check_keys(node: yaml.Node, path: str, seen: set[int]) -> None:
    """Reject duplicate and non-string keys anywhere in the composed YAML tree."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        keys: set[str] = set()
        for key, value in node.value:
            if key.tag == _MERGE_TAG:
                _check_keys(value, path, seen)
                continue
            name = _join(path, key.value if isinstance(key, yaml.ScalarNode) else "?")
            if not isinstance(key, yaml.ScalarNode) or key.tag != _STR_TAG:
                raise RequestError.for_field(
                    name, f"field names must be strings; quote it{_where(key.start_mark)}"
                )
            if key.value in keys:
                raise RequestError.for_field(name, f"is given twice{_where(key.start_mark)}")
            keys.add(key.value)
            _check_keys(value, name, seen)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _check_keys(item, _join(path, index), seen)


def _load_yaml(text: str) -> Any:
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_keys(node, "", set())
        return loader.construct_document(node)
    finally:
        loader.dispose()


class _JsonObject(dict[str, Any]):
    """A JSON object that remembers a key it was given twice."""

    duplicate: str | None = None


def _json_object(pairs: list[tuple[str, Any]]) -> _JsonObject:
    obj = _JsonObject()
    for key, value in pairs:
        if key in obj and obj.duplicate is None:
            obj.duplicate = key
        obj[key] = value
    return obj


def _plain(value: Any, path: str) -> Any:
    """Plain dicts and lists from parsed JSON, raising on the first key given twice."""
    if isinstance(value, _JsonObject):
        if value.duplicate is not None:
            raise RequestError.for_field(_join(path, value.duplicate), "is given twice")
        return {k: _plain(v, _join(path, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, _join(path, i)) for i, v in enumerate(value)]
    return value


def _load_json(text: str) -> Any:
    return _plain(json.loads(text, object_pairs_hook=_json_object), "")


def _describe(value: Any) -> str:
    if value is None:
        return "an empty document"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


def parse_document(text: str, source: str) -> Any:
    try:
        return _load_yaml(text)
    except yaml.YAMLError as yaml_error:
        if not text.lstrip().startswith("{"):
            mark = getattr(yaml_error, "problem_mark", None)
            problem = getattr(yaml_error, "problem", None) or str(yaml_error)
            rule = f"{source} is not valid YAML or JSON: {problem}{_where(mark)}"
            raise RequestError.for_field(WHOLE_REQUEST, " ".join(rule.split())) from None
    try:
        return _load_json(text)
    except json.JSONDecodeError as json_error:
        where = f"(line {json_error.lineno}, column {json_error.colno})"
        rule = f"{source} is not valid JSON: {json_error.msg} {where}"
        raise RequestError.for_field(WHOLE_REQUEST, rule) from None


def parse_request(text: str, source: str = "<request>") -> SimulationRequest:
    """Parse one YAML or JSON request document and validate it; raises RequestError naming each bad field.

    `source` names the document (a file path) in syntax errors.
    """
    data = parse_document(text, source)
    if not isinstance(data, dict):
        raise RequestError.for_field(
            WHOLE_REQUEST,
            f"{source} must be a mapping with model, cluster and layout (got {_describe(data)})",
        )
    try:
        return SimulationRequest.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc) from None


def read_request_text(path: str) -> str:
    """A request file's UTF-8 text; an unreadable file raises RequestError on field ``file``."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        raise RequestError.for_field("file", f"{path}: no such file") from None
    except IsADirectoryError:
        raise RequestError.for_field("file", f"{path}: is a directory") from None
    except UnicodeDecodeError:
        raise RequestError.for_field("file", f"{path}: is not UTF-8 text") from None
    except OSError as exc:
        raise RequestError.for_field("file", f"{path}: cannot be read ({exc.strerror or exc})") from None


def load_request_file(path: str) -> SimulationRequest:
    """Read a UTF-8 request file and parse it; an unreadable file raises RequestError on field ``file``."""
    return parse_request(read_request_text(path), source=path)
