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


@dataclass(frozen=True, slots=True)
class Pass:
    direction: str  # FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT or OVERLAPPED
    microbatch: int
    chunk: int
    # OVERLAPPED only: the backward half's microbatch and chunk (the fields above are the forward half's)
    backward_microbatch: int = -1
    backward_chunk: int = -1


def sends_gradient(direction: str) -> bool:
    """The pass ends with the input gradient the previous stage waits for."""
    return direction in (BACKWARD, BACKWARD_INPUT, OVERLAPPED)


def produces_weight_gradients(direction: str) -> bool:
    """The pass ends with the chunk's weight gradients of its microbatch (what data parallelism reduces)."""
    return direction in (BACKWARD, BACKWARD_WEIGHT, OVERLAPPED)


def releases_activations(direction: str) -> bool:
    """The last pass of a microbatch on a chunk: what it held since its forward pass is freed."""
    return direction in (BACKWARD, BACKWARD_WEIGHT)
