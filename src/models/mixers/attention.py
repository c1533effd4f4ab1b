"""The softmax attention family as registered sequence mixers (registry "seq_mixer"): five of
limits_of_icl's six mechanisms ("Not All Attention Is Created Equal"; FAVOR+ is in
linear_attention.py) and Zoology's multi-head attention.

Every mixer maps x [B, T, D] -> [B, T, D]: per-head projections q, k, v [B, T, H, K]
(K = D / H), a causal mixing (output at t reads tokens <= t only), and an output projection.

  softmax_causal  softmax(q kᵀ / √K) with a causal mask; Zoology's MHA with `dropout` (on the weights,
                  in training; default 0) and `bias` (q, k, v and output biases; default false)
  local           the same, keys restricted to [t − window + 1, t]
  local_global    limits_of_icl's window plus global positions (seen by and seeing every token)
  mqa             multi-query: H query heads share one key and one value head
  rela            ReLU(q kᵀ / √K) (no row normalisation), then an RMSNorm over the heads'
                  concatenated outputs gated by sigmoid(x W_g) (Zhang, Titov & Sennrich 2021)

Glossary: B batch, T tokens, D width, H heads, K head size.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from dataclasses import dataclass

import haiku as hk
import jax
import jax.numpy as jnp

from src.scoped import holding
from src.models.mixers.kit import (
    EPS,
    HeadsMixer,
    causal_mask,
    dropout,
    local_global_mask,
    project_out,
    project_qkv,
    register_mixer,
)
from src.models.positions import Encoding
from src.registry import NoOptions
from src.settings import added_field, require, require_int, require_number


_RECORDING = contextvars.ContextVar("recording_attention", default=False)


def recording_attention():
    """While a model is traced inside this context, every softmax attention stores its weights
    [B, H, T, T] (query t, key s) as Haiku state `attention_weights` of its mixer module, read
    back from `apply`'s returned state (analysis.recency). Outside it nothing is stored."""
    return holding(_RECORDING, True)


_FUSED = contextvars.ContextVar("fused_attention", default=False)


def fused_attention():
    """While a model is traced inside this context, softmax attention whose position encoding
    leaves the scores alone is jax.nn.dot_product_attention (`attention_kernel: fused`)."""
    return holding(_FUSED, True)


# SequenceConfig.attention_kernel -> the context its model is traced in
ATTENTION_KERNELS = {"einsum": contextlib.nullcontext, "fused": fused_attention}


def _fusable(position) -> bool:
    return position is None or (
        type(position).logits is Encoding.logits and type(position).query_scores is Encoding.query_scores
    )


def _softmax_attention(
    q, k, v, mask, position=None, window: int | None = None, fusable: bool = True, rate: float = 0.0
):
    """softmax(q kᵀ/√K) v over visible keys: q [B,T,H,K], k, v [B,T,H|1,K] -> [B,T,H,K]. A
    position encoding (src/models/positions.py) may rotate q, k and adjust the scores. The
    softmax is taken in float32 whatever the inputs' precision (a no-op for float32 models).
    `rate`: dropout on the weights in training (the fused kernel has none: a rate keeps the einsums)."""
    k, v = jnp.broadcast_to(k, q.shape), jnp.broadcast_to(v, q.shape)
    if position is not None:
        q, k = position.rotate(q, k)
    if fusable and not rate and _FUSED.get() and not _RECORDING.get() and _fusable(position):
        return jax.nn.dot_product_attention(
            q, k, v, is_causal=True, local_window_size=None if window is None else (window - 1, 0)
        )
    scores = jnp.einsum("bthk,bshk->bhts", q, k)
    extra = None if position is None else position.query_scores(q)
    scores = (scores if extra is None else scores + extra) / math.sqrt(q.shape[-1])
    if position is not None:
        scores = position.logits(scores)
    scores = jnp.where(mask, scores.astype(jnp.float32), -1e30)
    weights = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
    if _RECORDING.get():
        hk.set_state("attention_weights", weights)
    return jnp.einsum("bhts,bshk->bthk", dropout(weights, rate), v)


@dataclass(frozen=True)
class SoftmaxOptions:
    dropout: float = added_field(0.0)  # on the softmax weights, in training only (Zoology's MHA: 0.1 in figure 2)
    bias: bool = added_field(False)  # q, k, v and output projections with biases (Zoology's MHA)

    def check(self) -> None:
        require_number("dropout", self.dropout, 0.0, high=1.0, open_high=True)
        require(isinstance(self.bias, bool), "bias", self.bias, "true or false")


@dataclass(frozen=True)
class LocalOptions:
    window: int = 8  # keys in [t − window + 1, t]

    def check(self) -> None:
        require_int("window", self.window, 1)


@dataclass(frozen=True)
class LocalGlobalOptions:
    """limits_of_icl's `local_global` under its own keys (token indices, x and y tokens counted)."""

    local_window_size: int | None = None  # keys in [t − W + 1, t]; None: every earlier key
    global_attn_indices: tuple[int, ...] = ()  # seen by every later query, and see every earlier key

    def check(self) -> None:
        # the original's 0 leaves a query no key (its softmax of nothing); leave the key out for every earlier key
        if self.local_window_size is not None:
            require_int("local_window_size", self.local_window_size, 1)
        for i, g in enumerate(self.global_attn_indices):
            require_int(f"global_attn_indices[{i}]", g, 0)
        require(
            len(set(self.global_attn_indices)) == len(self.global_attn_indices),
            "global_attn_indices",
            list(self.global_attn_indices),
            "each position once",
        )

    def check_length(self, tokens: int) -> None:
        """The global positions inside a sequence of `tokens` tokens (the original drops the others)."""
        for i, g in enumerate(self.global_attn_indices):
            require(
                g < tokens,
                f"global_attn_indices[{i}]",
                g,
                f"a position below the model's {tokens} tokens "
                f"(0 to {tokens - 1}; a pair prompt counts its x and y tokens)",
            )


class SoftmaxCausal(HeadsMixer):
    """Softmax attention; a position encoding (src/models/positions.py) may rotate q and k and
    adjust the scores (bias, temperature)."""

    def __init__(
        self,
        num_heads,
        window: int | None = None,
        kv_heads: int | None = None,
        position=None,
        global_positions: tuple = (),
        options: SoftmaxOptions = SoftmaxOptions(),
        name=None,
    ):
        super().__init__(num_heads, name)
        self.window, self.kv_heads, self.position = window, kv_heads, position
        self.global_positions = tuple(global_positions)
        self.options = options

    def __call__(self, x):
        o = self.options
        q, k, v = project_qkv(x, self.num_heads, self.kv_heads, bias=o.bias)
        if self.global_positions:  # a mask the fused kernel cannot take: the einsum path
            mask = local_global_mask(x.shape[1], self.window, self.global_positions)
            y = _softmax_attention(q, k, v, mask, self.position, self.window, fusable=False, rate=o.dropout)
        else:
            y = _softmax_attention(
                q, k, v, causal_mask(x.shape[1], self.window), self.position, self.window, rate=o.dropout
            )
        return project_out(y, x.shape[-1], bias=o.bias)


class ReLA(HeadsMixer):
    def __call__(self, x):
        q, k, v = project_qkv(x, self.num_heads)
        scores = jnp.einsum("bthk,bshk->bhts", q, k) / math.sqrt(q.shape[-1])
        weights = jnp.where(causal_mask(x.shape[1]), jax.nn.relu(scores), 0.0)
        y = jnp.einsum("bhts,bshk->bthk", weights, v).reshape(x.shape)
        y = hk.RMSNorm(axis=-1, eps=EPS, name="norm")(y)
        gate = jax.nn.sigmoid(hk.Linear(x.shape[-1], with_bias=False, name="gate")(x))
        return hk.Linear(x.shape[-1], with_bias=False, name="out")(y * gate)


register_mixer(
    "softmax_causal",
    SoftmaxOptions,
    "causal scaled dot-product softmax attention",
    lambda o, h, n, p: SoftmaxCausal(h, position=p, options=o, name=n),
    softmax=True,
    state=lambda o, d, h, t: 2 * t * d,
    state_doc="2·T·D (every key and value)",
)
register_mixer(
    "local",
    LocalOptions,
    "causal softmax attention over the last `window` keys",
    lambda o, h, n, p: SoftmaxCausal(h, window=o.window, position=p, name=n),
    softmax=True,
    state=lambda o, d, h, t: 2 * min(t, o.window) * d,
    state_doc="2·min(T, window)·D",
)
register_mixer(
    "local_global",
    LocalGlobalOptions,
    "limits_of_icl: causal softmax over a window of local_window_size keys plus global positions (global_attn_indices)",
    lambda o, h, n, p: SoftmaxCausal(
        h, window=o.local_window_size, position=p, global_positions=o.global_attn_indices, name=n
    ),
    softmax=True,
    state=lambda o, d, h, t: (
        2 * d * (t if o.global_attn_indices or o.local_window_size is None else min(t, o.local_window_size))
    ),
    state_doc="2·min(T, W)·D; 2·T·D with global positions",
)
register_mixer(
    "mqa",
    NoOptions,
    "multi-query: H query heads share one key/value head",
    lambda o, h, n, p: SoftmaxCausal(h, kv_heads=1, position=p, name=n),
    softmax=True,
    state=lambda o, d, h, t: 2 * t * (d // h),
    state_doc="2·T·K (one key and value head)",
)
register_mixer(
    "rela",
    NoOptions,
    "ReLU(q k / sqrt K) attention, gated RMSNorm output (ReLA)",
    lambda o, h, n, p: ReLA(h, name=n),
    state=lambda o, d, h, t: 2 * t * d,
    state_doc="2·T·D (every key and value)",
)
