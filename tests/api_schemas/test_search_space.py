"""The search request's space lists: every size tried is a JSON-exact integer (at most 2^53), refused by the
field and index it is at otherwise, as every other integer of a request is."""

from __future__ import annotations

import json
from typing import Any

import pytest

from api_schemas import RequestError
from api_schemas.search import parse_search_request

BASE: dict[str, Any] = {"model": {"preset": "gpt3-125m"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
                        "global_batch_size": 16}
SIZE_LISTS = ["dp", "tp", "pp", "virtual_stages", "microbatch_size", "cp", "num_nodes", "ep", "expert_tp"]


@pytest.mark.parametrize("field", SIZE_LISTS)
def test_a_size_above_2_to_the_53_in_a_space_list_is_refused_by_its_place(field: str) -> None:
    doc = {**BASE, "space": {field: [1, 2**53 + 1]}}
    with pytest.raises(RequestError) as caught:
        parse_search_request(json.dumps(doc), syntax="json")
    assert [(d.field, d.rule) for d in caught.value.details] == [(f"space.{field}.1", "must be <= 9007199254740992")]


@pytest.mark.parametrize("field", SIZE_LISTS)
def test_a_size_of_2_to_the_53_is_still_a_size(field: str) -> None:
    doc = {**BASE, "space": {field: [1, 2**53]}}
    assert getattr(parse_search_request(json.dumps(doc), syntax="json").space, field) == [1, 2**53]
