"""What a pipeline schedule orders: passes of one microbatch through one model chunk of a rank.

A pass is (direction, microbatch, chunk). Directions:
- F: the forward pass;
- B: the whole backward pass, the input gradient and the weight gradient back to back (GPipe, 1F1B, interleaved);
- I: the input-gradient half of a backward pass (the zero-bubble papers' B): what the previous stage waits for;
- W: the weight-gradient half (the papers' W): nobody waits for it, a schedule may defer it to fill a bubble.
- FB: DualPipe's overlapped pair, the forward pass of (microbatch, chunk) and the whole backward pass of
  (backward_microbatch, backward_chunk) at once: each one's communication hides under the other's compute
  (DeepSeek-V3 report, section 3.2.1).
A schedule that splits a backward pass runs its I before its W. Qi et al. 2024 (Zero Bubble), section 2.
"""

from __future__ import annotations

from dataclasses import dataclass

FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT, OVERLAPPED = "F", "B", "I", "W", "FB"


@dataclass(frozen=True, slots=True, init=False)
class Pass:
    """One pass; interned: equal passes are one object (a schedule's lists repeat the same passes on every rank, so
    a long pipeline's lists, 64 ranks x 1,024 passes for the 1T example, hold a thousand objects, not 65,000)."""

    direction: str  # FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT or OVERLAPPED
    microbatch: int
    chunk: int
    # OVERLAPPED only: the backward half's microbatch and chunk (the fields above are the forward half's)
    backward_microbatch: int = -1
    backward_chunk: int = -1

    def __new__(cls, direction: str, microbatch: int, chunk: int, backward_microbatch: int = -1,
                backward_chunk: int = -1) -> Pass:
        key = (direction, microbatch, chunk, backward_microbatch, backward_chunk)
        found = _INTERNED.get(key)
        if found is None or type(found) is not cls:
            found = object.__new__(cls)
            for name, value in zip(_FIELDS, key):
                object.__setattr__(found, name, value)
            if len(_INTERNED) >= _MOST_INTERNED:
                _INTERNED.clear()
            _INTERNED[key] = found
        return found

    def __reduce__(self) -> tuple[type[Pass], tuple[str, int, int, int, int]]:
        return type(self), (self.direction, self.microbatch, self.chunk, self.backward_microbatch,
                            self.backward_chunk)


_FIELDS = ("direction", "microbatch", "chunk", "backward_microbatch", "backward_chunk")
_INTERNED: dict[tuple[str, int, int, int, int], Pass] = {}
_MOST_INTERNED = 1 << 20


def sends_gradient(direction: str) -> bool:
    """The pass ends with the input gradient the previous stage waits for."""
    return direction in (BACKWARD, BACKWARD_INPUT, OVERLAPPED)


def produces_weight_gradients(direction: str) -> bool:
    """The pass ends with the chunk's weight gradients of its microbatch (what data parallelism reduces)."""
    return direction in (BACKWARD, BACKWARD_WEIGHT, OVERLAPPED)


def releases_activations(direction: str) -> bool:
    """The last pass of a microbatch on a chunk: what it held since its forward pass is freed."""
    return direction in (BACKWARD, BACKWARD_WEIGHT)
