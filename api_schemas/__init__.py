"""api_schemas: the request and result documents (pydantic v2), request loading and request errors.

Imports nothing from the other project packages; service converts these models to and from the domain.
"""

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
