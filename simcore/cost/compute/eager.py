"""A layer's elementwise kernels as PyTorch eager runs them (`layout.elementwise_kernels: eager`): every tensor op of
the model's Python code is a kernel of its own that reads its inputs from HBM and writes its output there, in the
dtype the code gives it, where fused kernels (Transformer Engine's, or what torch.compile generates) read each
input once and write each output once.

The code is Llama's as torchtitan writes it (pytorch/torchtitan @9dec370ad26b5f8e9a7333a0e36165018262644b, the
commit of its 2024-12 benchmark runs):
- RMSNorm (torchtitan/models/norms.py, `RMSNorm`, the llama3 toml's `norm_type = "rmsnorm"`):
  `(x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * weight`;
- the rotary embedding (torchtitan/models/llama/model.py, `apply_rotary_emb`): `xq.float()` viewed as complex,
  multiplied by the frequencies, viewed back as real and cast with `type_as`; the same for xk;
- the gated MLP (model.py, `FeedForward.forward`): `w2(F.silu(w1(x)) * w3(x))`.
Each kernel's bytes per element of its tensor, forward, and of the kernels autograd runs for it in backward (each
elementwise op's backward reads the gradient and what it saved, and writes the input gradients; a tensor used
twice gets its two gradients summed by one more kernel):

  RMSNorm      float 2+4 | pow 4+4 | mean 4 | add eps, rsqrt (per row) | x*r 4+4 | type_as 4+2 | *weight 2+2
               = 36 bytes forward (fused: read 2, write 2 = 4); backward: float 4+2, pow 4+4+4, mean 4,
               x*r 4+4+4 and its row sum 4+4, the two gradients of x summed 4+4+4, type_as 2+4, *weight 2+2+2
               and its weight-gradient sum 2+2 = 66 (fused: read x and dy, write dx = 6);
  rotary       float 2+4 | complex multiply 4+4 | type_as 4+2 = 20 forward, 20 backward, on q's and k's
               elements (the fused model folds it into the attention kernels' traffic: none of its own);
  SwiGLU       silu 2+2 | multiply 2+2+2 = 10 per f-element forward (fused: 6); backward: multiply 2+2+2 and
               2+2+2, silu 2+2+2 = 18 (fused: 10).

A model's layer keeps its fused kernels' FLOPs and GEMMs; only these memory-bound kernels change. Non-gated
activations (gelu, squared relu) are one native kernel in eager PyTorch too, and so is torch.nn.LayerNorm: those
stay as the fused model has them.
"""

from __future__ import annotations

from simcore.cost.compute.kernels import Op, OpKind
from simcore.domain.model import LayerType, ModelShape

# (forward, backward) bytes per element of each eager kernel, in the order the code runs them.
RMSNORM_KERNELS: tuple[tuple[float, float], ...] = (
    (6.0, 6.0),  # x.float()
    (8.0, 12.0),  # .pow(2)
    (4.0, 4.0),  # .mean(-1): reads the fp32 squares; its backward writes the expanded gradient
    (0.0, 0.0),  # + eps (one value per row)
    (0.0, 0.0),  # torch.rsqrt (one value per row)
    (8.0, 28.0),  # x * rsqrt: backward's two products, the row sum, and the sum of x's two gradients
    (6.0, 6.0),  # .type_as(x)
    (4.0, 10.0),  # * weight: the input gradient and the weight gradient's product and sum
)
ROPE_KERNELS: tuple[tuple[float, float], ...] = ((6.0, 6.0), (8.0, 8.0), (6.0, 6.0))  # float, complex mul, type_as
SWIGLU_KERNELS: tuple[tuple[float, float], ...] = ((4.0, 6.0), (6.0, 12.0))  # silu, multiply
# What the fused model's kernels move per element (simcore/cost/compute/kernels.py): a norm reads and writes 2 bytes
# each.
FUSED_NORM_BYTES = 4.0


def eager_bytes(kernels: tuple[tuple[float, float], ...]) -> tuple[float, float]:
    """Forward and backward bytes per element of a chain of eager kernels."""
    return sum(f for f, _ in kernels), sum(b for _, b in kernels)


def _chain(name: str, elements: float, kernels: tuple[tuple[float, float], ...]) -> list[Op]:
    ops = []
    for i, (forward, backward) in enumerate(kernels):
        # a kernel that moves nothing per element (a per-row op) still costs its launch; its backward moves the
        # same nothing (the ratio is moot)
        ratio = backward / forward if forward > 0 else 1.0
        ops.append(Op(f"{name}_eager{i}", OpKind.MEMORY, 0.0, forward * elements, ratio))
    return ops


def eager_elementwise(ops: tuple[Op, ...], model: ModelShape, b: int, t: int, layer: LayerType) -> tuple[Op, ...]:
    """A layer's forward kernels (simcore/cost/compute/kernels.py's, fused) with its norms, rotary embedding and gated
    activation run as eager PyTorch kernels (module docstring): each norm becomes RMSNorm's chain over the same
    elements, the rotary embedding's chains follow the QKV projection (on its rank's q and k heads), and a gated
    activation becomes silu and a product."""
    tokens = b * layer.seq
    q_elements = tokens * model.num_attention_heads / t * model.head_dim
    k_elements = tokens * max(model.num_kv_heads / t, 1.0) * model.head_dim
    out: list[Op] = []
    for op in ops:
        if op.name in ("layernorm", "cross_layernorm"):
            out += _chain(op.name, op.bytes / FUSED_NORM_BYTES, RMSNORM_KERNELS)
        elif op.name == "activation" and model.gated_mlp:
            # the fused op moves 3 x 2 bytes per f-element (reads both halves, writes the product)
            out += _chain(op.name, op.bytes / 6.0, SWIGLU_KERNELS)
        else:
            out.append(op)
        if op.name == "qkv":
            out += _chain("rotary_q", q_elements, ROPE_KERNELS) + _chain("rotary_k", k_elements, ROPE_KERNELS)
    return tuple(out)
