"""Reading a request document from text or a file (YAML, which includes JSON) and validating it.

A document declared JSON (``syntax="json"``, what the service does for ``Content-Type: application/json``) is
read as JSON only; one declared YAML as YAML only; an undeclared one (a file) as YAML, then as JSON if YAML
cannot read it (and as JSON at once when it is a "{" mapping holding a tab: JSON indented with tabs). Beyond
plain YAML and JSON: a key given twice is an error (a silently overridden field is a hidden typo), field names
must be strings (YAML reads a bare ``on:`` as a bool), ``1e9`` is a number, as in JSON, and JSON's ``NaN`` and
``Infinity`` are not. What any document may hold is bounded so that reading it costs little whatever it is: at
most `MAX_DEPTH` nested mappings and lists (checked before the JSON parser runs, and as YAML is composed), at
most `MAX_ALIASES` YAML aliases, and no string with a lone UTF-16 surrogate (a surrogate pair written as two
escapes, as ``json.dumps`` writes an emoji, is one character).
This module is the package's only I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from api_schemas.errors import WHOLE_REQUEST, RequestError, from_validation_error
from api_schemas.request import SimulationRequest

__all__ = ["MAX_ALIASES", "MAX_DEPTH", "MAX_VALUES", "Syntax", "load_request_file", "parse_document", "parse_request"]

Syntax = Literal["json", "yaml"]

# The deepest nesting of mappings and lists a document may have (a request nests 4 deep; a search request's
# space or a sweep's grid of whole sections a few more), and the most YAML aliases (*name) it may use.
MAX_DEPTH = 32
MAX_ALIASES = 64
# The most values (mappings, lists and scalars, YAML aliases counted as what they stand for) a document holds:
# a comparison of 16 requests holds about a thousand.
MAX_VALUES = 20_000

_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"


# libyaml's scanner and parser when PyYAML was built with it (tens of times faster on a large document), with
# PyYAML's own composer, constructor and resolver on top so that the limits below apply as the document is
# composed. PyYAML exports the C parser only from its cyaml module.
class _PyParser(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):
    def __init__(self, text: str) -> None:
        yaml.reader.Reader.__init__(self, text)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)


try:
    from yaml.cyaml import CParser  # type: ignore[attr-defined]  # the stubs export only the loaders

    _Parser: Any = CParser
except ImportError:  # PyYAML built without libyaml
    _Parser = _PyParser


class _Loader(yaml.composer.Composer, _Parser, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
    """A safe loader that also reads exponent floats without a dot or exponent sign (``1e9``, ``2.5e3``), and
    refuses more than MAX_VALUES nodes, nesting past MAX_DEPTH and more than MAX_ALIASES aliases while it
    composes (before any recursion could go deep, and before an alias bomb is expanded by anything that walks
    the document)."""

    def __init__(self, text: str) -> None:
        _Parser.__init__(self, text)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self._depth = self._aliases = self._nodes = 0

    def dispose(self) -> None:
        _Parser.dispose(self)

    def _refuse(self, rule: str) -> RequestError:
        return RequestError.for_field(WHOLE_REQUEST, f"{rule}{_where(self.peek_event().start_mark)}")

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise self._refuse(f"uses more than {MAX_ALIASES} YAML aliases")
        self._nodes += 1
        if self._nodes > MAX_VALUES:
            raise self._refuse(f"holds more than {MAX_VALUES} values")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise self._refuse(f"nests more than {MAX_DEPTH} levels deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


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


# libyaml refuses a \u escape of a UTF-16 surrogate, which is how JSON writes a character beyond U+FFFF (an
# emoji: "\ud83d\ude00"), and so how a YAML document made by a JSON encoder holds one. Each such pair (one
# whose backslash is not itself escaped) becomes the one \U escape YAML has for the character; a lone surrogate
# stays and is refused by name (_yaml_rule). The same text in a plain or single-quoted scalar, where a backslash
# escapes nothing, becomes the \U text: a pair there is almost surely that character written for JSON.
_SURROGATE_PAIR = re.compile(r"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})")
_LONE_SURROGATE = re.compile(r"[dD][89a-fA-F][0-9a-fA-F]{2}")


def _pairs_joined(text: str) -> str:
    """The text with each escaped surrogate pair as one \\U escape (for libyaml; PyYAML's own parser reads both)."""
    if _Parser is _PyParser or "\\u" not in text:
        return text

    def joined(pair: re.Match[str]) -> str:
        start = pair.start()
        while start > 0 and text[start - 1] == "\\":
            start -= 1
        if (pair.start() - start) % 2:  # an escaped backslash, then a "u"
            return pair.group()
        code = 0x10000 + ((int(pair[1], 16) - 0xD800) << 10) + (int(pair[2], 16) - 0xDC00)
        return f"\\U{code:08x}"

    return _SURROGATE_PAIR.sub(joined, text)


def _yaml_rule(error: yaml.YAMLError, text: str, source: str, what: str) -> str:
    """The rule a document broke, from the YAML parser's error."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    index = getattr(mark, "index", -1)
    if "escape" in problem and text[index - 2:index] == "\\u" and _LONE_SURROGATE.match(text, index):
        return f"holds a lone UTF-16 surrogate (an unpaired escape between \\ud800 and \\udfff){_where(mark)}"
    return " ".join(f"{source} is not valid {what}: {problem}{_where(mark)}".split())


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


# A JSON string, or one of the characters that open, close or separate values.
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},:]', re.DOTALL)


def _json_shape_within(text: str) -> None:
    """Refuse JSON text nesting past MAX_DEPTH (brackets outside strings) or with more than MAX_VALUES values,
    before json parses it: a token at a time, stopping at the first limit passed, or where the text stops being
    JSON (a closer with nothing open, two strings with nothing between them: the parser then says where), so
    that at most about 3 x MAX_VALUES tokens are looked at whatever the text (and a service's other threads keep
    running)."""
    depth = values = strings = 0
    for token in _JSON_TOKEN.finditer(text):
        char = token.group()[0]
        if char == '"':
            strings += 1
            if strings > values + 1:  # every string but a lone top-level one follows a [, , or : of its own
                return
            continue
        if char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise RequestError.for_field(WHOLE_REQUEST, f"nests more than {MAX_DEPTH} levels deep")
        elif char in "]}":
            depth -= 1
            if depth < 0:
                return
            continue
        values += 1
        if values > MAX_VALUES:
            raise RequestError.for_field(WHOLE_REQUEST, f"holds more than {MAX_VALUES} values")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _load_json(text: str, source: str) -> Any:
    _json_shape_within(text)
    try:
        data = json.loads(text, object_pairs_hook=_json_object, parse_constant=_refuse_constant)
    except json.JSONDecodeError as json_error:
        where = f"(line {json_error.lineno}, column {json_error.colno})"
        rule = f"{source} is not valid JSON: {json_error.msg} {where}"
        raise RequestError.for_field(WHOLE_REQUEST, rule) from None
    except ValueError as err:  # NaN or Infinity, an integer of thousands of digits
        raise RequestError.for_field(WHOLE_REQUEST, f"{source} is not valid JSON: {err}") from None
    return _plain(data, "")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _containers(node: Any) -> list[Any]:
    items = [*node.keys(), *node.values()] if isinstance(node, dict) else node if isinstance(node, list) else []
    return [item for item in items if isinstance(item, dict | list)]


def _measure(data: Any) -> None:
    """Refuse a document deeper than MAX_DEPTH or larger than MAX_VALUES once aliases are expanded, or one that
    contains itself; without recursion, in time linear in the distinct mappings and lists, and as soon as the
    distinct values alone are too many."""
    done: dict[int, tuple[int, int]] = {}  # id -> (depth, values) of a measured mapping or list
    started: set[int] = set()
    distinct = 0
    stack: list[tuple[Any, list[Any] | None]] = [(data, None)]
    while stack:
        node, kids = stack.pop()
        if id(node) in done or not isinstance(node, dict | list):
            continue
        if kids is None:
            if id(node) in started:
                raise RequestError.for_field(WHOLE_REQUEST, "contains itself (a recursive YAML alias)")
            started.add(id(node))
            kids = _containers(node)
            stack.append((node, kids))
            stack.extend((kid, None) for kid in kids if id(kid) not in done)
            continue
        depth = 1 + max((done[id(kid)][0] for kid in kids), default=0)
        scalars = (2 * len(node) if isinstance(node, dict) else len(node)) - len(kids)
        values = 1 + scalars + sum(done[id(kid)][1] for kid in kids)
        distinct += 1 + scalars
        if depth > MAX_DEPTH:
            raise RequestError.for_field(WHOLE_REQUEST, f"nests more than {MAX_DEPTH} levels deep")
        if values > MAX_VALUES or distinct > MAX_VALUES:
            raise RequestError.for_field(WHOLE_REQUEST, f"holds more than {MAX_VALUES} values")
        done[id(node)] = (depth, values)


def _text(value: str, path: str) -> str:
    """The string with each surrogate pair made one character; a lone surrogate is refused."""
    if not _SURROGATE.search(value):
        return value
    try:
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        raise RequestError.for_field(path or WHOLE_REQUEST, "holds a lone UTF-16 surrogate (an unpaired escape "
                                     "between \\ud800 and \\udfff)") from None


def _strings(value: Any, path: str) -> Any:
    """A copy with every string (keys too) through `_text` (depth already bounded by `_measure`)."""
    if isinstance(value, str):
        return _text(value, path)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            name = _text(key, path) if isinstance(key, str) else key
            out[name] = _strings(item, _join(path, name))
        return out
    if isinstance(value, list):
        return [_strings(item, _join(path, index)) for index, item in enumerate(value)]
    return value


def _describe(value: Any) -> str:
    if value is None:
        return "an empty document"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


def _read(text: str, source: str, syntax: Syntax | None) -> Any:
    # An undeclared document that opens a mapping with "{" and holds a tab is JSON indented with tabs, which
    # YAML 1.1 refuses (PyYAML's own reader does; libyaml reads it, and would read a JSON syntax error in it as
    # some other YAML): read as JSON, so that an error is the JSON one, with its line.
    if syntax == "json" or (syntax is None and "\t" in text and text.lstrip().startswith("{")):
        return _load_json(text, source)
    as_yaml = _pairs_joined(text)
    try:
        return _load_yaml(as_yaml)
    except yaml.YAMLError as yaml_error:
        if syntax == "yaml" or not text.lstrip().startswith("{"):
            what = "YAML" if syntax == "yaml" else "YAML or JSON"
            raise RequestError.for_field(WHOLE_REQUEST, _yaml_rule(yaml_error, as_yaml, source, what)) from None
    except ValueError as err:  # an integer of thousands of digits
        raise RequestError.for_field(WHOLE_REQUEST, f"{source} cannot be read: {err}") from None
    return _load_json(text, source)


def parse_document(text: str, source: str, syntax: Syntax | None = None) -> Any:
    """The document's data: read as JSON (`syntax` "json"), YAML ("yaml"), or YAML then JSON (None); within
    MAX_DEPTH, MAX_ALIASES and MAX_VALUES, surrogate pairs joined. Raises RequestError on field ``request``."""
    data = _read(text, source, syntax)
    _measure(data)
    return _strings(data, "")


def parse_request(text: str, source: str = "<request>", syntax: Syntax | None = None) -> SimulationRequest:
    """Parse one YAML or JSON request document and validate it; raises RequestError naming each bad field.

    `source` names the document (a file path) in syntax errors; `syntax` as for `parse_document`.
    """
    return _validated(parse_document(text, source, syntax), source)


def _validated(data: Any, source: str) -> SimulationRequest:
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
    """A UTF-8 request file parsed (RequestError on ``file`` if unreadable), cluster.topology/measured files in."""
    from api_schemas.measured import with_measured_file
    from api_schemas.topology_file import with_topology_file

    return _validated(with_measured_file(with_topology_file(parse_document(read_request_text(path), path), path),
                                         path, parse_document), path)
