"""POST /v1/comparisons through a real app instance (TestClient runs the lifespan: store, worker processes): rows
in the order of the requests with the figures `clustersim compare` gives, labels given or defaulted, and every
invalid body a 422 (or an over-limit one a 413) naming the field as `requests[1].layout.tp`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import with_field
from fastapi.testclient import TestClient

from api_schemas.compare import MAX_REQUESTS, ComparisonResult
from service.compare import compare_requests
from service.http.app import create_app
from service.settings import Settings

# GPT-3 125M on 8 A100s (milliseconds each): one stage, and a pipeline of unequal stages (5 layers on 4).
DP8: dict[str, Any] = {"model": {"preset": "gpt3-125m"}, "cluster": {"preset": "dgx-a100", "num_gpus": 8},
                       "layout": {"dp": 8, "tp": 1, "pp": 1, "global_batch_size": 16}}
PP4: dict[str, Any] = {"model": {"preset": "gpt3-125m", "num_layers": 5, "vocab_size": 1024},
                       "cluster": {"preset": "dgx-a100", "num_gpus": 8},
                       "layout": {"dp": 2, "tp": 1, "pp": 4, "global_batch_size": 16}}
TP2: dict[str, Any] = {"model": {"preset": "gpt3-125m"}, "cluster": {"preset": "dgx-a100", "num_gpus": 8},
                       "layout": {"dp": 2, "tp": 2, "pp": 2, "global_batch_size": 16}}
MAX_GPUS = 16


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    database: Path = tmp_path_factory.mktemp("compare") / "api.db"
    app = create_app(Settings(database=str(database), workers=2, max_gpus=MAX_GPUS))
    with TestClient(app, base_url="http://localhost") as c:
        yield c


def assert_error(response: Any, status: int, field: str, rule: str = "") -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == ("invalid_request" if status == 422 else "too_large")
    assert error["message"]
    assert error["details"][0]["field"] == field, error
    assert rule in error["details"][0]["rule"], error
    return error


def test_rows_in_order_with_the_cli_figures(client: TestClient) -> None:
    response = client.post("/v1/comparisons", json={"requests": [PP4, DP8, TP2], "labels": ["pp", "dp", "tp"]})
    assert response.status_code == 200, response.text
    document = response.json()
    ComparisonResult.model_validate(document)
    assert [row["label"] for row in document["rows"]] == ["pp", "dp", "tp"]
    assert [row["layout"]["pp"] for row in document["rows"]] == [4, 1, 2]
    assert document == compare_requests([("pp", PP4), ("dp", DP8), ("tp", TP2)])
    assert document["rows"][0]["stage_imbalance"] > 1.2  # the first and last stages embed and compute logits
    assert document["rows"][1]["stage_imbalance"] == 1.0
    # Again: from the results cache, the same document.
    assert client.post("/v1/comparisons", json={"requests": [PP4, DP8, TP2],
                                                "labels": ["pp", "dp", "tp"]}).json() == document


def test_labels_default_to_the_place_in_the_body_and_yaml_bodies_work(client: TestClient) -> None:
    body = yaml.safe_dump({"requests": [DP8, DP8]})
    response = client.post("/v1/comparisons", content=body, headers={"content-type": "application/yaml"})
    assert response.status_code == 200, response.text
    rows = response.json()["rows"]
    assert [row["label"] for row in rows] == ["requests[0]", "requests[1]"]
    assert rows[0] == {**rows[1], "label": "requests[0]"}


BAD_BODIES: list[tuple[str, Any, str, str]] = [
    # (id, body, field named, a fragment of the rule)
    ("below range", {"requests": [DP8, with_field(DP8, "layout.tp", 0)]}, "requests[1].layout.tp", ">= 1"),
    ("wrong type", {"requests": [with_field(DP8, "layout.tp", "2")]}, "requests[0].layout.tp", "integer"),
    ("unknown nested field", {"requests": [DP8, with_field(DP8, "layout.tpp", 2)]}, "requests[1].layout.tpp",
     "unknown field"),
    ("domain rule", {"requests": [DP8, PP4, with_field(DP8, "layout.dp", 4)]}, "requests[2].layout.dp",
     "must equal the number of GPUs"),
    ("unknown preset", {"requests": [with_field(DP8, "model.preset", "gpt-5")]}, "requests[0].model.preset", ""),
    ("missing section", {"requests": [{"model": {"preset": "gpt3-125m"}}]}, "requests[0].cluster", "required"),
    ("labels too few", {"requests": [DP8, PP4], "labels": ["only one"]}, "labels", "one label per request"),
    ("labels too many", {"requests": [DP8], "labels": ["a", "b"]}, "labels", "one label per request"),
    ("labels repeat", {"requests": [DP8, PP4], "labels": ["a", "a"]}, "labels", "distinct"),
    ("empty label", {"requests": [DP8], "labels": [""]}, "labels[0]", ""),
    ("no requests", {"requests": []}, "requests", "1 to 16"),
    ("too many requests", {"requests": [DP8] * (MAX_REQUESTS + 1)}, "requests", "1 to 16"),
    ("requests missing", {"labels": ["a"]}, "requests", "required"),
    ("unknown top-level field", {"requests": [DP8], "label": ["a"]}, "label", "unknown field"),
    ("a single request, not a comparison", DP8, "requests", "required"),
    ("not a mapping", [DP8], "request", "mapping"),
]


@pytest.mark.parametrize(("name", "body", "field", "rule"), BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_invalid_bodies_are_422_naming_the_field(client: TestClient, name: str, body: Any, field: str,
                                                 rule: str) -> None:
    assert_error(client.post("/v1/comparisons", content=json.dumps(body)), 422, field, rule)


@pytest.mark.parametrize(("name", "body", "field"), [
    ("bad yaml", b"requests: [unclosed", "request"),
    ("duplicate key", b'{"requests": [{"model": {"preset": "a", "preset": "b"}}]}', "requests[0].model.preset"),
    ("not utf-8", b"\xff\xfe\x00requests", "request"),
    ("empty body", b"", "request"),
])
def test_unreadable_bodies_are_422(client: TestClient, name: str, body: bytes, field: str) -> None:
    assert_error(client.post("/v1/comparisons", content=body), 422, field)


def test_over_the_gpu_limit_is_413_naming_the_request(client: TestClient) -> None:
    big = with_field(with_field(DP8, "cluster.num_gpus", 2 * MAX_GPUS), "layout.dp", 2 * MAX_GPUS)
    big = with_field(big, "layout.global_batch_size", 2 * MAX_GPUS)
    error = assert_error(client.post("/v1/comparisons", json={"requests": [DP8, big]}), 413,
                         "requests[1].cluster.num_gpus", f"<= {MAX_GPUS}")
    assert error["message"].startswith("requests[1]: ")
    assert error["limit"] == MAX_GPUS


def test_the_route_and_its_schemas_are_in_openapi(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    operation = spec["paths"]["/v1/comparisons"]["post"]
    assert {"200", "413", "422"} <= operation["responses"].keys()
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/ComparisonRequest"}
    schemas = spec["components"]["schemas"]
    request = schemas["ComparisonRequest"]
    assert request["properties"]["requests"]["maxItems"] == MAX_REQUESTS
    assert request["properties"]["requests"]["items"] == {"$ref": "#/components/schemas/SimulationRequest"}
    assert "ComparisonResult" in schemas and "SimulationRequest" in schemas
