"""The limits a search runs under, for a service job and the CLI alike, and the cost model that screens its
candidates.

Every candidate a search simulates is a simulation, costed by the estimate simulations are admitted by
(simcore.run_cost.estimate_cost, service.limits). A search's bounds (api_schemas.search.SearchBoundsIn) carry:
- per candidate, `max_candidate_events` and `max_candidate_memory_mb`: a candidate over one is screened
  (listed with its estimate and the reason, not simulated: simcore.planning.screen). The service and the CLI
  set them from the job limits: the job's engine events and half a simulation process's memory cap, as a
  simulation is admitted;
- for the whole search, `max_estimated_s`: candidates are simulated, most promising first, while the sum of
  their estimated seconds stays within it. A service job sets it so that the search ends within the job's time
  limit: that limit less an upper bound of the planning (enumerating, pruning and ordering the space), over
  ESTIMATE_SHORTFALL, the most the estimate has been found short on search candidates. A search whose planning
  alone may take more than half its job's time limit is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from api_schemas import FieldError
from api_schemas.search import SearchBoundsIn
from service.limits import MEMORY_HEADROOM, MIB, LimitError, Limits
from simcore import Scenario
from simcore.planning.screen import CandidateCost, Screen
from simcore.run_cost import SECONDS_PER_EVENT, estimate_cost

__all__ = ["ESTIMATE_SHORTFALL", "Capped", "cap_bounds", "candidate_cost", "events_bound", "planning_bound_s",
           "screen_for"]

# CPU time over estimate of candidates, measured on the 2-core development machine under load: at most 2.54 over
# 93 random candidates of every kind of layout in seven searches (ZeRO-3 and context parallelism with ZeRO 3 on
# Qwen3-30B-A3B highest; `python bench/search_admission.py --events 3 --seed 5`), 1.59-1.67 for the first
# candidates of GPT-1T at full fidelity (`--candidates 3 --only gpt-1t-3072-full`). The engine events behind it
# are within 1.15x of the estimate on those candidates (before the estimate counted what MoE layouts reduce, TP
# groups across nodes and context parallelism's ring sends, up to 9.3x over it: Mixtral with ZeRO 2).
ESTIMATE_SHORTFALL = 4.0
# The planning's CPU time (space.py, prune.py, estimate.py) over the space's bound of its layouts, measured on the
# 2-core development machine under load: 12.6 us a bound layout for GPT-1T on 3072 GPUs (1,520,640; 19.1 s),
# 23.7 and 49.0 us for GPT-3 175B on 1024 (the whole space and docs/search.md's), 58.7 for Llama-3-70B on 256, and
# 1.7 s for a narrowed Llama space of 1,440, most of it what every planning costs once.
PLANNING_FIXED_S = 2.0
PLANNING_S_PER_LAYOUT = 6.0e-5


def candidate_cost(scenario: Scenario) -> CandidateCost:
    """The estimated cost of simulating one candidate, as the simulation would be admitted (no spans: a search
    records none)."""
    cost = estimate_cost(replace(scenario, keep_spans=False))
    return CandidateCost(cost.events, cost.seconds, cost.memory_bytes)


def screen_for(bounds: SearchBoundsIn) -> Screen | None:
    """The screen of a search's bounds (None when they set no limit of the kind)."""
    memory = bounds.max_candidate_memory_mb
    if bounds.max_candidate_events is None and memory is None and bounds.max_estimated_s is None:
        return None
    return Screen(candidate_cost, bounds.max_candidate_events, memory * MIB if memory is not None else None,
                  bounds.max_estimated_s)


def planning_bound_s(layouts: int, time_limit_s: float | None = None) -> float:
    """An upper bound of the planning's seconds for a space of at most `layouts` layouts (the time limit, when
    there is one, stops enumerating at it)."""
    bound = PLANNING_FIXED_S + PLANNING_S_PER_LAYOUT * layouts
    return min(bound, time_limit_s) if time_limit_s is not None else bound


def events_bound(bounds: SearchBoundsIn) -> int | None:
    """The most engine events a search with these bounds simulates (what a budget of estimated seconds or the
    candidates' count and event limit allow, whichever is less; None when nothing bounds it)."""
    figures = []
    if bounds.max_estimated_s is not None:
        figures.append(int(bounds.max_estimated_s / SECONDS_PER_EVENT))
    if bounds.max_candidates is not None and bounds.max_candidate_events is not None:
        figures.append(bounds.max_candidates * bounds.max_candidate_events)
    return min(figures) if figures else None


@dataclass(frozen=True, slots=True)
class Capped:
    """Bounds with the limits applied, and each bound that was lowered (or set) with the rule that did it."""

    bounds: SearchBoundsIn
    caps: tuple[FieldError, ...]


def cap_bounds(bounds: SearchBoundsIn, limits: Limits | None, *, max_candidates: int | None = None,
               job_timeout_s: float | None = None, layouts: int = 0) -> Capped:
    """`bounds` within the job limits (a candidate's events and memory; None: no such limit), `max_candidates`
    (the service's), and, given `job_timeout_s`, a budget of estimated seconds that ends the search within it
    (`layouts`: the bound of its space's layouts). Raises LimitError (field "space") when the planning alone may
    take more than half of `job_timeout_s`."""
    update: dict[str, int | float] = {}
    caps: list[FieldError] = []

    def lower(name: str, value: int | float, rule: str) -> None:
        asked = getattr(bounds, name)
        if asked is None or asked > value:
            update[name] = value
            caps.append(FieldError(f"bounds.{name}", rule))

    if max_candidates is not None:
        lower("max_candidates", max_candidates, f"at most {max_candidates} (the service's "
              "CLUSTERSIM_MAX_SEARCH_CANDIDATES)")
    if limits is not None:
        lower("max_candidate_events", limits.max_events, f"at most {limits.max_events} (a job's estimated engine "
              "events): a candidate over it is screened, not simulated")
        memory_mb = int(limits.memory_bytes * MEMORY_HEADROOM) // MIB
        lower("max_candidate_memory_mb", memory_mb, f"at most {memory_mb} MiB (half a simulation process's memory "
              "cap): a candidate over it is screened, not simulated")
    if job_timeout_s is not None:
        planning_s = planning_bound_s(layouts, bounds.time_limit_s)
        if planning_s > job_timeout_s / 2:
            raise LimitError("space", f"estimated planning time must be <= {job_timeout_s / 2:g} s (half the job "
                             "time limit)", f"the search's planning may take up to {planning_s:.0f} s (its space may "
                             f"hold {layouts} layouts), over half of this service's job time limit of "
                             f"{job_timeout_s:g} s; list fewer values in space or set bounds.time_limit_s",
                             {"estimated_planning_s": round(planning_s, 1), "limit_s": job_timeout_s / 2})
        budget_s = round((job_timeout_s - planning_s) / ESTIMATE_SHORTFALL, 1)
        lower("max_estimated_s", budget_s, f"at most {budget_s:g} s of estimated simulation: the job time limit "
              f"({job_timeout_s:g} s) less the planning's bound ({planning_s:.1f} s), over {ESTIMATE_SHORTFALL:g} "
              "(the estimate can be that short), so that the search ends within its time limit")
    return Capped(bounds.model_copy(update=update), tuple(caps))
