"""clustersim from Python: simulate, compare, sweep and search training layouts, and draw them.

    import clustersim
    result = clustersim.simulate({
        "model": {"preset": "gpt3-13b"},
        "cluster": {"preset": "dgx-a100", "num_nodes": 8},
        "layout": {"dp": 1, "tp": 8, "pp": 8, "global_batch_size": 8, "recompute": "full"},
    })
    result.iteration_time_s, result.bubble_fraction      # the document POST /v1/simulations answers
    clustersim.plot(request, "timeline.svg")             # the pipeline timeline (matplotlib; .svg or .png)

A request is a mapping (as read from YAML or JSON), a `SimulationRequest` or the path of a request file.
Results are the pydantic documents the HTTP API answers (`.model_dump()` gives the JSON). Invalid input raises
`clustersim.InvalidRequest` (a ValueError) naming the field and the rule: `err.field`, `err.rule`.

This package is a thin facade over the service layer (service.python_api, which converts through
service.convert); code inside the project uses simcore's public face instead.
"""

from service.python_api import (
    InvalidRequest,
    SimulationRequest,
    SimulationResult,
    Sweep,
    calibrate,
    compare,
    export_config,
    import_config,
    plot,
    request_from,
    search,
    simulate,
    sweep,
)

__all__ = ["InvalidRequest", "SimulationRequest", "SimulationResult", "Sweep", "calibrate", "compare",
           "export_config", "import_config", "plot", "request_from", "search", "simulate", "sweep"]
