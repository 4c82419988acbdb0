"""The streaming scan of a body's shape (service.http.bodyshape): the same answer however the body is cut into
chunks; for JSON a refusal of the bodies the loader's own pre-parse check refuses, and only those; for YAML never
a refusal of a document the loader accepts; deep, wide and deeply indented bodies refused by the rule they
break, before any parser runs, and answered on a connection the client can still read."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import Server
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import api_schemas.loading as loading
from api_schemas import RequestError
from service.http import bodyshape
from service.http.app import create_app
from service.http.bodyshape import MAX_INDENT, MAX_QUOTES, BodyShape
from service.http.context import Service
from service.settings import Settings

SMALL_DEPTH, SMALL_VALUES = 4, 30  # limits small enough for generated documents to cross them
HOSTILE = 980_000  # bytes of the bodies a hostile client sends: just under the 1 MB body limit


def scan(body: bytes, syntax: Any, cuts: list[int] | None = None) -> BodyShape:
    """The scan of `body` fed in the chunks that `cuts` (offsets) make."""
    shape = BodyShape(syntax)
    points = [0, *sorted({c for c in cuts or [] if 0 < c < len(body)}), len(body)]
    for start, end in zip(points, points[1:]):
        shape.feed(body[start:end])
    return shape


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (loading, bodyshape):
        monkeypatch.setattr(module, "MAX_DEPTH", SMALL_DEPTH)
        monkeypatch.setattr(module, "MAX_VALUES", SMALL_VALUES)


# Text that is hard to scan: every byte the scan treats specially, escapes, and non-ASCII.
TRICKY = st.text(alphabet=st.sampled_from(list("\"'#[]{},:\\- \n\tx9é") + ["\U0001f600"]), max_size=12)
SCALARS = st.one_of(TRICKY, st.integers(-10, 10), st.booleans(), st.none())
DOCS = st.recursive(SCALARS, lambda kids: st.lists(kids, max_size=6) | st.dictionaries(TRICKY, kids, max_size=5),
                    max_leaves=40)
CUTS = st.lists(st.integers(0, 2_000), max_size=8)
RELAXED = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def loader_rule(text: str, syntax: Any) -> str | None:
    try:
        loading.parse_document(text, "body", syntax)
    except RequestError as err:
        return err.details[0].rule
    return None


def json_check_rule(text: str) -> str | None:
    """What the loader's own pre-parse JSON check refuses."""
    try:
        loading._json_shape_within(text)
    except RequestError as err:
        return err.details[0].rule
    return None


@RELAXED
@given(doc=DOCS, cuts=CUTS, indent=st.sampled_from([None, 1, 4]), ascii_only=st.booleans())
def test_json_is_refused_exactly_as_the_loaders_own_check_refuses_it(small_limits: None, doc: Any, cuts: list[int],
                                                                     indent: int | None, ascii_only: bool) -> None:
    text = json.dumps(doc, indent=indent, ensure_ascii=ascii_only)
    shape, rule = scan(text.encode(), "json", cuts), json_check_rule(text)
    assert (shape.refusal is None) == (rule is None)
    if shape.refusal != rule:  # a text that breaks both rules: the scan sees a chunk at once, not its order
        tokens = [t.group() for t in loading._JSON_TOKEN.finditer(text)]  # a string is one token
        assert depth_of(doc) > SMALL_DEPTH and sum(t in ("[", "{", ",", ":") for t in tokens) > SMALL_VALUES
    if shape.refusal is not None:  # and the loader itself refuses it too
        assert loader_rule(text, "json") == rule


def depth_of(value: Any) -> int:
    """How deep mappings and lists nest (a scalar: 0): what the scan's brackets would show."""
    kids = [*value.values()] if isinstance(value, dict) else value if isinstance(value, list) else None
    return 0 if kids is None else 1 + max(map(depth_of, kids), default=0)


def nodes_of(value: Any) -> int:
    """The nodes the YAML composer makes of a document: one per mapping, list, key and scalar."""
    if isinstance(value, dict):
        return 1 + sum(nodes_of(k) + nodes_of(v) for k, v in value.items())
    return 1 + sum(map(nodes_of, value)) if isinstance(value, list) else 1


def assert_breaks(doc: Any, refusal: str | None) -> None:
    """A YAML refusal is a rule the document really breaks."""
    if refusal is not None and refusal.startswith("nests"):
        assert depth_of(doc) > SMALL_DEPTH, refusal
    elif refusal is not None:
        assert refusal == f"holds more than {SMALL_VALUES} values" and nodes_of(doc) > SMALL_VALUES, refusal


# Block-style YAML may hold brackets and commas in plain scalars (x[y, a,b), which the scan counts (see its
# docstring): its documents are drawn without them. In flow style and in JSON every bracket and comma is
# structure or is quoted.
PLAIN = st.text(alphabet=st.sampled_from(list("\"'#:\\- \n\tx9é")), max_size=12)
BLOCK_DOCS = st.recursive(st.one_of(PLAIN, st.integers(-10, 10), st.none()),
                          lambda kids: st.lists(kids, max_size=6) | st.dictionaries(PLAIN, kids, max_size=5),
                          max_leaves=40)


@RELAXED
@given(doc=DOCS, block=BLOCK_DOCS, cuts=CUTS, width=st.sampled_from([8, 80, 10_000]))
def test_yaml_is_refused_only_for_a_rule_it_breaks(small_limits: None, doc: Any, block: Any, cuts: list[int],
                                                   width: int) -> None:
    flow = yaml.safe_dump(doc, default_flow_style=True, allow_unicode=True, width=width)
    as_json = json.dumps(doc)  # JSON is YAML, and what a client that names no type sends
    lines = yaml.safe_dump(block, default_flow_style=False, allow_unicode=True, width=width)
    for text in (flow, as_json, lines):
        for syntax in ("yaml", None):
            assert_breaks(yaml.safe_load(text), scan(text.encode(), syntax, cuts).refusal)  # what the text holds


@RELAXED
@given(body=st.binary(max_size=300) | st.text(alphabet="\"'#[]{},:\\- \n\rx", max_size=300).map(str.encode),
       cuts=CUTS, syntax=st.sampled_from(["json", "yaml", None]))
def test_the_answer_does_not_depend_on_where_the_chunks_end(small_limits: None, body: bytes, cuts: list[int],
                                                            syntax: Any) -> None:
    def answer(shape: BodyShape) -> tuple[Any, ...]:  # once a scan has stopped, its depth means nothing
        return shape.refusal, shape._stopped, None if shape._stopped or shape.refusal else shape.depth

    whole = answer(scan(body, syntax))
    assert answer(scan(body, syntax, [c % (len(body) + 1) for c in cuts])) == whole
    assert answer(scan(body, syntax, list(range(len(body))))) == whole


@pytest.mark.parametrize(("body", "syntax", "rule"), [
    (b"[" * 33 + b"]" * 33, "json", "nests more than 32 levels deep"),
    (b"[" * 33 + b"]" * 33, "yaml", "nests more than 32 levels deep"),
    (b"a: " + b"{b: " * 33 + b"}" * 33, None, "nests more than 32 levels deep"),
    (b"[" * HOSTILE, None, "nests more than 32 levels deep"),
    (b"[" + b"0," * 20_000 + b"0]", "json", "holds more than 20000 values"),
    (b"[" + b"0," * 20_000 + b"0]", "yaml", "holds more than 20000 values"),
    (b"".join(b"k%d: 0\n" % i for i in range(10_001)), "yaml", "holds more than 20000 values"),
    (b"- 0\n" * 20_001, "yaml", "holds more than 20000 values"),
    (b"a:\n" + b" " * (MAX_INDENT + 1) + b"b: 1\n", "yaml", f"indents a line by more than {MAX_INDENT} columns"),
    (b"x'" * (MAX_QUOTES + 1), "yaml", f"holds more than {MAX_QUOTES} quote and '#' characters"),
    (b"#\n" * 40_001, "yaml", "holds more than 40000 quoted strings and comments"),
])
def test_a_body_past_a_limit_is_refused_by_the_rule_it_breaks(body: bytes, syntax: Any, rule: str) -> None:
    assert scan(body, syntax, list(range(0, len(body), 65_536))).refusal == rule


@pytest.mark.parametrize(("body", "syntax"), [
    (b'["' + b"[" * 40 + b'"]', "json"),  # brackets inside strings are text
    (b'a: "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[ \\" [[["\n', "yaml"),
    (b"a: '" + b"[" * 40 + b"'' " + b"{" * 40 + b"'\n", "yaml"),
    (b"# " + b"[" * 40 + b"\na: 1\n", "yaml"),
    (b"a: it's no string, [sic]\nb: " + b"[" * 32 + b"]" * 32 + b"\n", "yaml"),  # an apostrophe is text
    (b"a: x]]]]\nb: [1, [2]]\n", "yaml"),  # closers in a plain scalar: text
    (b"# a note:\n" * 15_000 + b"a: 1\n", "yaml"),  # a colon that ends a comment is no mapping indicator
    (b"a:\n" + b" " * MAX_INDENT + b"b: 1\n" + b" " * 1000 + b"\n", "yaml"),  # a blank line of spaces is no content
])
def test_brackets_in_strings_and_comments_and_shallow_text_pass(body: bytes, syntax: Any) -> None:
    for step in (len(body), 1, 7, 65_536):
        assert scan(body, syntax, list(range(0, len(body), step))).refusal is None


def test_json_that_stops_being_json_stops_the_scan_and_the_parser_says_where() -> None:
    for body in (b"]" + b"[" * 100, b'"a" "b" "c"'):
        shape = scan(body, "json")
        assert shape.refusal is None and shape._stopped
        assert "not valid JSON" in (loader_rule(body.decode(), "json") or "")


@pytest.mark.parametrize("body", [b"[" * HOSTILE, b"[]" * (HOSTILE // 2), b"\n" * HOSTILE, b"x'" * (HOSTILE // 2),
                                  b'"' * HOSTILE, b"#\n" * (HOSTILE // 2), b"a: " + b"x" * HOSTILE])
def test_any_body_is_scanned_in_a_bounded_time(body: bytes) -> None:
    for syntax in ("json", "yaml"):
        started = time.process_time()
        scan(body, syntax, list(range(0, len(body), 65_536)))
        # CPU time, not wall time: about 1 to 60 ms on a quiet machine; seconds before the scan
        assert time.process_time() - started < 0.5


# --- through the app --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    database: Path = tmp_path_factory.mktemp("shape") / "api.db"
    with TestClient(create_app(Settings(database=str(database), workers=1)), base_url="http://localhost") as c:
        yield c


@pytest.mark.parametrize("content_type", ["application/json", "application/yaml", None])
@pytest.mark.parametrize("route", ["/v1/simulations", "/v1/jobs", "/v1/searches", "/v1/comparisons"])
def test_a_deep_body_is_422_before_any_parser_runs(client: TestClient, monkeypatch: pytest.MonkeyPatch,
                                                   content_type: str | None, route: str) -> None:
    parsed: list[Any] = []

    async def off_loop(self: Service, work: Any, *args: Any) -> Any:  # where the routes parse and admit
        parsed.append(work)
        raise AssertionError("a parser ran")

    monkeypatch.setattr(Service, "off_loop", off_loop)
    headers = {"content-type": content_type} if content_type else {}
    response = client.post(route, content=b"[" * HOSTILE, headers=headers)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["details"] == [{"field": "request", "rule": "nests more than 32 levels deep"}]
    assert parsed == []


@pytest.mark.slow
def test_a_deep_body_is_answered_on_a_connection_the_client_can_still_use(tmp_path: Path) -> None:
    server = Server(tmp_path / "s.db", tmp_path / "server.log", CLUSTERSIM_WORKERS="1")
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            for _ in range(3):  # the body was read to its end: the same connection goes on
                response = http.post("/v1/simulations", content=b"[" * HOSTILE,
                                     headers={"content-type": "application/yaml"})
                assert response.status_code == 422, response.text
                assert response.json()["error"]["details"][0]["rule"] == "nests more than 32 levels deep"
            assert http.get("/healthz").status_code == 200
    finally:
        server.stop()


def test_a_request_document_is_scanned_without_a_refusal() -> None:
    examples = sorted((Path(__file__).resolve().parents[3] / "examples").rglob("*.yaml"))
    assert examples
    for path in examples:
        body = path.read_bytes()
        assert scan(body, "yaml", list(range(0, len(body), 61))).refusal is None, path
        data = yaml.safe_load(body)
        assert scan(json.dumps(data).encode(), "json", list(range(0, len(body), 61))).refusal is None, path

