"""How titles and tables name a run's parallel layout, GPU and precision, the same in every picture and table.

- `parallel_dimensions(2, 4, 1, 4, 8)` -> 'DP 2 x TP 4 x PP 1 x CP 4 (x EP 8)': DP, TP and PP always; CP and EP
  where they are above 1. EP is in parentheses because it does not multiply the GPU count: the experts are
  spread over ep of the dp x cp x tp ranks of a stage (contract: ep x expert_tp divides tp x cp x dp).
- `gpu_name(cluster)` -> 'A100 80GB' from a request's cluster section (its preset's GPU, `gpu`, a user-defined
  `gpu_spec`'s name, or each node group's, joined with ' + ').
- `precision_name('fp8', 'rowwise')` -> 'fp8 (rowwise)'; 'bf16' by default.

Titles of one run (service.plots.pictures), the compare and search tables (service.cli) and the pictures of
comparisons and searches use them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the command line imports this module before it needs the documents or the simulator
    from api_schemas import SimulationRequest
    from api_schemas.cluster import ClusterIn

__all__ = ["echoed_request", "gpu_label", "gpu_name", "layout_line", "parallel_dimensions", "precision_name",
           "request_line"]


def parallel_dimensions(dp: int, tp: int, pp: int, cp: int = 1, ep: int = 1) -> str:
    """'DP 2 x TP 4 x PP 1 x CP 4 (x EP 8)': CP and EP only where above 1."""
    text = f"DP {dp} x TP {tp} x PP {pp}" + (f" x CP {cp}" if cp > 1 else "")
    return text + (f" (x EP {ep})" if ep > 1 else "")


def gpu_label(kind: str) -> str:
    """A catalog GPU's id as people write it: 'h100-80gb' -> 'H100 80GB', 'gb300' -> 'GB300'."""
    return " ".join(part.upper() for part in kind.split("-"))


def gpu_name(cluster: ClusterIn) -> str:
    """The cluster's GPU (or its node groups' GPUs, in order, each once), as `gpu_label` writes it; 'GPU' where
    the section names none that is known (a preset no longer in the catalog)."""
    from simcore import NODE_PRESETS

    if cluster.gpu_spec is not None:
        default = cluster.gpu_spec.name
    elif cluster.gpu is not None:
        default = gpu_label(str(cluster.gpu))
    elif cluster.preset in NODE_PRESETS:
        default = gpu_label(str(NODE_PRESETS[cluster.preset].gpu))
    else:
        default = ""
    names: list[str] = []
    for group in cluster.node_groups or ():
        name = (group.gpu_spec.name if group.gpu_spec is not None else
                gpu_label(str(group.gpu)) if group.gpu is not None else default)
        if name and name not in names:
            names.append(name)
    return " + ".join(names) or default or "GPU"


def precision_name(precision: str | None = None, fp8_recipe: str | None = None, fp8_scaling: str | None = None) -> str:
    """'bf16' (the default), 'fp16', 'fp8 (tensorwise)', 'fp8 (tensorwise, current)', ...: FP8 names its recipe
    (default tensorwise) and current scaling."""
    precision = str(precision or "bf16")
    if precision != "fp8":
        return precision
    return f"fp8 ({fp8_recipe or 'tensorwise'}{', current' if fp8_scaling == 'current' else ''})"


def layout_line(layout: Mapping[str, Any], gpu: str | None = None) -> str:
    """'DP 2 x TP 4 x PP 1 x CP 4 (x EP 8), H100 80GB, bf16' from a layout mapping (a request's, a search entry's or
    a comparison row's: missing cp, ep and precision are their defaults) and the GPU's name."""
    dims = parallel_dimensions(int(layout["dp"]), int(layout["tp"]), int(layout["pp"]), int(layout.get("cp") or 1),
                               int(layout.get("ep") or 1))
    parts = [dims, *([gpu] if gpu else []), precision_name(layout.get("precision"), layout.get("fp8_recipe"),
                                                                layout.get("fp8_scaling"))]
    return ", ".join(parts)


def request_line(request: SimulationRequest) -> str:
    """`layout_line` of a simulation request: its layout, its cluster's GPU and its precision."""
    return layout_line(request.layout.model_dump(), gpu_name(request.cluster))


def echoed_request(document: Mapping[str, Any]) -> SimulationRequest | None:
    """The request a result document echoes (its `request` section), or None where it has none that validates
    (a document saved before results echoed their request)."""
    from pydantic import ValidationError

    from api_schemas import SimulationRequest

    echo = document.get("request")
    if not isinstance(echo, Mapping):
        return None
    try:
        return SimulationRequest.model_validate(echo)
    except ValidationError:
        return None
