"""Based's linear attention (Arora et al. 2024, "Simple linear attention language models balance
the recall-throughput tradeoff"), as Zoology runs it (`zoology/mixers/based.py` with
`feature_maps/taylor.py`), registry "seq_mixer" `based`.

Per head, q_t, k_t = x W_q, x W_k [f] (f = `feature_dim`, no biases), v = x W_v [K], and the
second-order Taylor feature map of exp(q·k / √f),

    φ(u) = (1, u / f^¼, vec(u uᵀ) / (√2 √f))        so   φ(q)·φ(k) = 1 + q·k/√f + (q·k)² / (2f),

in a causal normalised linear attention

    y_t = Σ_{s≤t} (φ(q_t)·φ(k_s)) v_s / (Σ_{s≤t} φ(q_t)·φ(k_s) + ε),   ε = 10⁻¹²,

then the heads' outputs projected back to D. It trains in Zoology's "quadratic view" (the
[T, T] weights from the right-hand side above, causally masked), which is the map of the
recurrent one: the state Σ φ(k_s) v_sᵀ and Σ φ(k_s) (the test holds the two together). Zoology's
Based model puts this layer after a BaseConv layer, and its ablations add a sliding-window
attention layer: here those are hybrid stacks (`seq_mixers`, src/models/sequence.py) of
`base_conv`, `based` and `local`. Zoology's MQAR configs: 1 head, feature_dim 8, 16 or 24.

State per sequence and layer: the outer product u uᵀ is symmetric, so φ needs
E = 1 + f + f(f+1)/2 features, and a head keeps E·K + E floats (Zoology's `state_size`).

Glossary: B batch, T tokens, D width, H heads, K head size (D / H), f feature size, E features.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import haiku as hk
import jax.numpy as jnp

from src.models.mixers.kit import project_out, register_mixer, OptionsMixer

EPS = 1e-12  # added to the denominator (Zoology's eps)


@dataclass(frozen=True)
class BasedOptions:
    feature_dim: int = 16  # f: the size of q and k per head before the feature map

    def check(self) -> None:
        if isinstance(self.feature_dim, bool) or not isinstance(self.feature_dim, int) or self.feature_dim < 1:
            raise ValueError(f"feature_dim={self.feature_dim!r}; accepted: an integer >= 1")


def taylor_weights(q, k):
    """φ(q_t)·φ(k_s) without the features: q, k [B, T, H, f] -> [B, H, T, T], causally masked."""
    f = q.shape[-1]
    dots = jnp.einsum("bthf,bshf->bhts", q, k)
    weights = 1 + dots / math.sqrt(f) + dots * dots / (2 * f)
    t = q.shape[1]
    return jnp.where(jnp.tril(jnp.ones((t, t), bool)), weights, 0.0)


class Based(OptionsMixer):
    def __call__(self, x):
        b, t, d = x.shape
        h, f = self.num_heads, self.options.feature_dim
        q, k = (hk.Linear(h * f, with_bias=False, name=n)(x).reshape(b, t, h, f) for n in ("q", "k"))
        v = hk.Linear(d, with_bias=False, name="v")(x).reshape(b, t, h, d // h)
        weights = taylor_weights(q, k)
        y = jnp.einsum("bhts,bshk->bthk", weights, v) / (jnp.moveaxis(weights.sum(-1), 1, 2)[..., None] + EPS)
        return project_out(y, d)


def features(f: int) -> int:
    """E = 1 + f + f(f+1)/2: the Taylor map's distinct features."""
    return 1 + f + f * (f + 1) // 2


register_mixer(
    "based",
    BasedOptions,
    "Zoology: Based, linear attention with the 2nd-order Taylor feature map of exp (quadratic view)",
    lambda o, h, n, p: Based(h, o, name=n),
    state=lambda o, d, h, t: h * features(o.feature_dim) * (d // h + 1),
    state_doc="H·E·(K + 1), E = 1 + f + f(f+1)/2",
)
