"""GET /v1/presets/{models|clusters|gpus}: the presets a request may name."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter

from service import convert
from service.http.context import AUTHORIZED

router = APIRouter(tags=["presets"], dependencies=AUTHORIZED)


def _catalog(kind: str) -> Callable[[], Awaitable[dict[str, Any]]]:
    async def presets() -> dict[str, Any]:
        return convert.presets(kind)

    presets.__doc__ = f"The {kind} presets a request may name."
    return presets


for _kind in ("models", "clusters", "gpus"):
    router.get(f"/v1/presets/{_kind}", response_model=dict[str, Any], name=f"presets_{_kind}")(_catalog(_kind))
