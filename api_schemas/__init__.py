"""api_schemas: the request and result documents (pydantic v2), request loading and request errors.

Imports nothing from the other project packages; service converts these models to and from the domain.
"""

from typing import TYPE_CHECKING, Any

from api_schemas.errors import FieldError, RequestError, error_body, from_validation_error
from api_schemas.loading import load_request_file, parse_request
from api_schemas.request import (
    PARALLEL_DIMENSIONS,
    ClusterIn,
    GpuSpecIn,
    LayoutIn,
    ModelIn,
    OptionsIn,
    SimulationRequest,
    TrainingIn,
)

if TYPE_CHECKING:
    from api_schemas.result import (
        CommunicationBytes,
        CommunicationTimes,
        MemoryBreakdown,
        MemoryResult,
        SimulationResult,
        SimulatorInfo,
        StageMemory,
        StageResult,
        TimeBreakdown,
        TrainingResult,
    )

_RESULT_MODELS = frozenset({"CommunicationBytes", "CommunicationTimes", "MemoryBreakdown", "MemoryResult",
                            "SimulationResult", "SimulatorInfo", "StageMemory", "StageResult", "TimeBreakdown",
                            "TrainingResult"})


def __getattr__(name: str) -> Any:
    """The result models are built on first use: reading and validating a request (the command line's
    `simulate`, which writes its result as plain JSON) does not pay for their schemas."""
    if name in _RESULT_MODELS:
        from api_schemas import result

        return getattr(result, name)
    raise AttributeError(f"module 'api_schemas' has no attribute {name!r}")


__all__ = [
    "PARALLEL_DIMENSIONS",
    "ClusterIn",
    "CommunicationBytes",
    "CommunicationTimes",
    "FieldError",
    "GpuSpecIn",
    "LayoutIn",
    "MemoryBreakdown",
    "MemoryResult",
    "ModelIn",
    "OptionsIn",
    "RequestError",
    "SimulationRequest",
    "SimulationResult",
    "SimulatorInfo",
    "StageMemory",
    "StageResult",
    "TimeBreakdown",
    "TrainingIn",
    "TrainingResult",
    "error_body",
    "from_validation_error",
    "load_request_file",
    "parse_request",
]
