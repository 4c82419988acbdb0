"""The engine's objects point one way (the engine holds the synchronisation, which holds the streams and the
collectives; a stream holds callables and its rendezvous, never the synchronisation): a simulation leaves no
reference cycle of the engine's behind for the garbage collector, in representative and full fidelity, with every
ZeRO stage. The one cycle left is SimPy's own: a simpy.Environment binds its event classes to itself
(`env.process`, `env.timeout`, ...) as it is made, and holds its (then empty) queue and counter; nothing of the
engine's is in it."""

from __future__ import annotations

import gc

import pytest

from simcore.domain.layout import Fidelity, Layout, Schedule
from simcore.domain.model import model_from_fields
from simcore.domain.presets import MODEL_PRESETS
from simcore.network import build_network
from simcore.simulate import Scenario, simulate
from topology import NODE_PRESETS, sized

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

MODEL = model_from_fields(MODEL_PRESETS["gpt3-1.3b"])


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
@pytest.mark.parametrize("fidelity", list(Fidelity))
def test_a_simulation_leaves_no_reference_cycle(zero: int, fidelity: Fidelity) -> None:
    layout = Layout(dp=2, tp=2, pp=4, microbatch_size=1, global_batch_size=16, virtual_stages=2,
                    schedule=Schedule.INTERLEAVED_1F1B, zero_stage=zero, overlap_grad_reduce=zero % 2 == 1)
    scenario = Scenario(MODEL, sized(NODE_PRESETS["dgx-a100"], 16), layout, fidelity=fidelity, keep_spans=True)
    network = build_network(scenario.cluster, scenario.algorithm)  # built outside the measurement
    simulate(scenario, network)
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        simulate(scenario, network)
        found = gc.collect()
        kinds = sorted({type(o).__qualname__ for o in gc.garbage})
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
    simpys_own = {"Environment", "count", "list", "method", "dict"}  # its bound classes, queue and counter
    assert set(kinds) <= simpys_own, f"cycles of {kinds}"
    assert found <= 16, f"{found} objects in cycles: more than one environment's own"
