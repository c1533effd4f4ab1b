"""Causal attention mechanisms as registered sequence mixers (registry "seq_mixer"), the six
of limits_of_icl ("Not All Attention Is Created Equal") plus plain causal linear attention.

Every mixer maps x [B, T, D] -> [B, T, D]: per-head projections q, k, v [B, T, H, K]
(K = D / H), a causal mixing (output at t reads tokens <= t only), and an output projection.

  softmax_causal  softmax(q kᵀ / √K) with a causal mask; Zoology's MHA with `dropout` (on the weights,
                  in training; default 0) and `bias` (q, k, v and output biases; default false)
  local           the same, keys restricted to [t − window + 1, t]
  mqa             multi-query: H query heads share one key and one value head
  rela            ReLU(q kᵀ / √K) (no row normalisation), then an RMSNorm over the heads'
                  concatenated outputs gated by sigmoid(x W_g) (Zhang, Titov & Sennrich 2021)
  favor           FAVOR+ (Choromanski et al. 2021): positive orthogonal random features
                  φ(u) = exp(ωᵀu − ‖u‖²/2)/√m of u = q/K^¼ (and k), causal prefix sums
                  y_t = φ(q_t)ᵀ S_t / (φ(q_t)ᵀ z_t + ε); the features are drawn once, from a
                  fixed key per layer, and never redrawn (the redraw policy)
  rebased         ReBased (Aksenov et al. 2024): φ(u) = (γ ⊙ LN(u) + β)² per head, normalised
                  causal prefix sums
  linear          y_t = Σ_{s<=t} (q_t · k_s) v_s, no normalisation (`scale: sum`, the default), or
                  that sum over the t visible tokens' count (`scale: mean`): von Oswald et al.'s
                  linear self-attention, whose sum over the context is one GD step only when
                  divided by the number of examples

Glossary: B batch, T tokens, D width, H heads, K head size, m random features.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
from dataclasses import dataclass

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from src.models.positions import Encoding
from src.registry import NoOptions, registry
from src.settings import added_field, require, require_int, require_number

MIXERS = registry("seq_mixer")
EPS = 1e-6
MAX_CHUNK = 4096     # the largest `chunk` a mixer with a chunked form accepts


def check_chunk(chunk) -> None:
    """The `chunk` option of a mixer with a chunked form (positions per chunk): one line unless an
    integer in [1, MAX_CHUNK]."""
    require_int("chunk", chunk, 1, MAX_CHUNK)


def causal_mask(t: int, window: int | None = None) -> jax.Array:
    """[T, T] bool: key s visible from query t (s <= t, and s > t − window if given)."""
    return jnp.asarray(_causal_mask(t, window))


def _causal_mask(t: int, window: int | None = None) -> np.ndarray:
    """`causal_mask` in NumPy (a constant of the traced program: built before any jnp call)."""
    rows, cols = np.arange(t)[:, None], np.arange(t)[None, :]
    mask = cols <= rows
    if window is not None:
        mask &= cols > rows - window
    return mask


def local_global_mask(t: int, window: int | None, global_positions: tuple = ()) -> jax.Array:
    """[T, T] bool, limits_of_icl's `local_global`: the causal window, and every global position g
    (a token index) both seen by every later query and, as a query, seeing every earlier key."""
    mask = _causal_mask(t, window)
    for g in global_positions:
        if g < t:
            mask[g, : g + 1] = True
            mask[g:, g] = True
    return jnp.asarray(mask)


def dropout(x: jax.Array, rate: float) -> jax.Array:
    """x with each element zeroed with probability `rate`, the others scaled by 1 / (1 − rate), where
    `apply` got a dropout key (training); x itself at rate 0, at init and without a key (evaluation)."""
    if not rate or hk.running_init():
        return x
    key = hk.maybe_next_rng_key()
    return x if key is None else hk.dropout(key, rate, x)


def project_qkv(x: jax.Array, num_heads: int, kv_heads: int | None = None, bias: bool = False):
    """One fused projection [D, (H + 2 H_kv) K] (called inside a mixer module), split into
    q [B, T, H, K] and k, v [B, T, H_kv, K]."""
    b, t, d = x.shape
    kv_heads = kv_heads or num_heads
    k_size = d // num_heads
    sizes = (num_heads, kv_heads, kv_heads)
    fused = hk.Linear(sum(sizes) * k_size, with_bias=bias, name="qkv")(x)
    q, k, v = jnp.split(fused, np.cumsum(sizes)[:2] * k_size, axis=-1)
    return tuple(a.reshape(b, t, h, k_size) for a, h in zip((q, k, v), sizes))


def project_out(y: jax.Array, width: int, bias: bool = False) -> jax.Array:
    """Heads [B, T, H, K] concatenated and projected back to [B, T, D]."""
    b, t = y.shape[:2]
    return hk.Linear(width, with_bias=bias, name="out")(y.reshape(b, t, -1))


_RECORDING = contextvars.ContextVar("recording_attention", default=False)


@contextlib.contextmanager
def recording_attention():
    """While a model is traced inside this context, every softmax attention stores its weights
    [B, H, T, T] (query t, key s) as Haiku state `attention_weights` of its mixer module, read
    back from `apply`'s returned state (analysis.recency). Outside it nothing is stored."""
    token = _RECORDING.set(True)
    try:
        yield
    finally:
        _RECORDING.reset(token)


_FUSED = contextvars.ContextVar("fused_attention", default=False)


@contextlib.contextmanager
def fused_attention():
    """While a model is traced inside this context, softmax attention whose position encoding
    leaves the scores alone is jax.nn.dot_product_attention (`attention_kernel: fused`)."""
    token = _FUSED.set(True)
    try:
        yield
    finally:
        _FUSED.reset(token)


# SequenceConfig.attention_kernel -> the context its model is traced in
ATTENTION_KERNELS = {"einsum": contextlib.nullcontext, "fused": fused_attention}


def _fusable(position) -> bool:
    return position is None or type(position).logits is Encoding.logits


def _softmax_attention(q, k, v, mask, position=None, window: int | None = None, fusable: bool = True,
                       rate: float = 0.0):
    """softmax(q kᵀ/√K) v over visible keys: q [B,T,H,K], k, v [B,T,H|1,K] -> [B,T,H,K]. A
    position encoding (src/models/positions.py) may rotate q, k and adjust the scores. The
    softmax is taken in float32 whatever the inputs' precision (a no-op for float32 models).
    `rate`: dropout on the weights in training (the fused kernel has none: a rate keeps the einsums)."""
    k, v = jnp.broadcast_to(k, q.shape), jnp.broadcast_to(v, q.shape)
    if position is not None:
        q, k = position.rotate(q, k)
    if fusable and not rate and _FUSED.get() and not _RECORDING.get() and _fusable(position):
        return jax.nn.dot_product_attention(q, k, v, is_causal=True,
                                            local_window_size=None if window is None else (window - 1, 0))
    scores = jnp.einsum("bthk,bshk->bhts", q, k) / math.sqrt(q.shape[-1])
    if position is not None:
        scores = position.logits(scores)
    scores = jnp.where(mask, scores.astype(jnp.float32), -1e30)
    weights = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
    if _RECORDING.get():
        hk.set_state("attention_weights", weights)
    return jnp.einsum("bhts,bshk->bthk", dropout(weights, rate), v)


@dataclass(frozen=True)
class SoftmaxOptions:
    dropout: float = added_field(0.0)   # on the softmax weights, in training only (Zoology's MHA: 0.1 in figure 2)
    bias: bool = added_field(False)     # q, k, v and output projections with biases (Zoology's MHA)

    def check(self) -> None:
        require_number("dropout", self.dropout, 0.0, high=1.0, open_high=True)
        require(isinstance(self.bias, bool), "bias", self.bias, "true or false")


@dataclass(frozen=True)
class LocalOptions:
    window: int = 8       # keys in [t − window + 1, t]

    def check(self) -> None:
        require_int("window", self.window, 1)


@dataclass(frozen=True)
class LocalGlobalOptions:
    """limits_of_icl's `local_global` under its own keys (token indices, x and y tokens counted)."""
    local_window_size: int = 0                   # keys in [t − W + 1, t]; 0: every earlier key (its None)
    global_attn_indices: tuple[int, ...] = ()    # seen by every later query, and see every earlier key

    def check(self) -> None:
        require_int("local_window_size", self.local_window_size, 0)
        for i, g in enumerate(self.global_attn_indices):
            require_int(f"global_attn_indices[{i}]", g, 0)


@dataclass(frozen=True)
class LinearOptions:
    scale: str = "sum"     # sum: Σ_{s<=t} (q_t · k_s) v_s; mean: the same divided by t (visible tokens)

    def check(self) -> None:
        if self.scale not in LINEAR_SCALES:
            raise ValueError(f"scale={self.scale!r} is not accepted; accepted: {', '.join(LINEAR_SCALES)}")


LINEAR_SCALES = ("sum", "mean")


@dataclass(frozen=True)
class FavorOptions:
    num_features: int = 64   # m positive random features per head

    def check(self) -> None:
        require_int("num_features", self.num_features, 1, 65_536)


class _Mixer(hk.Module):
    def __init__(self, num_heads: int, name: str | None = None):
        super().__init__(name=name)
        self.num_heads = num_heads


class SoftmaxCausal(_Mixer):
    """Softmax attention; a position encoding (src/models/positions.py) may rotate q and k and
    adjust the scores (bias, temperature)."""
    def __init__(self, num_heads, window: int | None = None, kv_heads: int | None = None,
                 position=None, global_positions: tuple = (), options: SoftmaxOptions = SoftmaxOptions(),
                 name=None):
        super().__init__(num_heads, name)
        self.window, self.kv_heads, self.position = window, kv_heads, position
        self.global_positions = tuple(global_positions)
        self.options = options

    def __call__(self, x):
        o = self.options
        q, k, v = project_qkv(x, self.num_heads, self.kv_heads, bias=o.bias)
        if self.global_positions:                  # a mask the fused kernel cannot take: the einsum path
            mask = local_global_mask(x.shape[1], self.window, self.global_positions)
            y = _softmax_attention(q, k, v, mask, self.position, self.window, fusable=False, rate=o.dropout)
        else:
            y = _softmax_attention(q, k, v, causal_mask(x.shape[1], self.window), self.position, self.window,
                                   rate=o.dropout)
        return project_out(y, x.shape[-1], bias=o.bias)


class ReLA(_Mixer):
    def __call__(self, x):
        q, k, v = project_qkv(x, self.num_heads)
        scores = jnp.einsum("bthk,bshk->bhts", q, k) / math.sqrt(q.shape[-1])
        weights = jnp.where(causal_mask(x.shape[1]), jax.nn.relu(scores), 0.0)
        y = jnp.einsum("bhts,bshk->bthk", weights, v).reshape(x.shape)
        y = hk.RMSNorm(axis=-1, eps=EPS, name="norm")(y)
        gate = jax.nn.sigmoid(hk.Linear(x.shape[-1], with_bias=False, name="gate")(x))
        return hk.Linear(x.shape[-1], with_bias=False, name="out")(y * gate)


def positive_random_features(u: jax.Array, omega: jax.Array) -> jax.Array:
    """φ(u) = exp(ωᵀu − ‖u‖²/2)/√m: u [..., K], ω [K, m] -> [..., m]."""
    m = omega.shape[-1]
    return jnp.exp(u @ omega - 0.5 * jnp.sum(u ** 2, axis=-1, keepdims=True)) / math.sqrt(m)


def orthogonal_gaussian(key: jax.Array, size: int, count: int) -> jax.Array:
    """[size, count] columns: blocks of orthogonal directions with chi-distributed norms."""
    blocks = []
    for i in range(math.ceil(count / size)):
        g = jax.random.normal(jax.random.fold_in(key, i), (size, size))
        q, r = jnp.linalg.qr(g)
        blocks.append(q * jnp.sign(jnp.diagonal(r)))   # sign fix: Haar-distributed directions
    directions = jnp.concatenate(blocks, axis=1)[:, :count]
    norms = jnp.linalg.norm(jax.random.normal(jax.random.fold_in(key, 10_000), (size, count)), axis=0)
    return directions * norms


def kernel_prefix_attention(phi_q, phi_k, v, normalise: bool = True):
    """Causal Σ_{s<=t} (φ_q,t · φ_k,s) v_s (/ Σ_{s<=t} φ_q,t · φ_k,s) with prefix sums of the
    state S_t = Σ_{s<=t} φ_k,s v_sᵀ: phi_q, phi_k [B, T, H, m], v [B, T, H, K] -> [B, T, H, K].
    The recurrent definition (memory O(T m K)); `kernel_attention` is the same sum."""
    state = jnp.cumsum(jnp.einsum("bthm,bthk->bthmk", phi_k, v), axis=1)   # S_t
    y = jnp.einsum("bthm,bthmk->bthk", phi_q, state)
    if not normalise:
        return y
    z = jnp.cumsum(phi_k, axis=1)                                           # z_t
    return y / (jnp.einsum("bthm,bthm->bth", phi_q, z)[..., None] + EPS)


def kernel_attention(phi_q, phi_k, v, normalise: bool = True):
    """The same causal sum as kernel_prefix_attention, as a masked [T, T] product: identical
    mathematics, much faster for the short sequences of in-context regression (T <= ~100)."""
    weights = jnp.einsum("bthm,bshm->bhts", phi_q, phi_k)
    weights = jnp.where(causal_mask(phi_q.shape[1]), weights, 0.0)
    y = jnp.einsum("bhts,bshk->bthk", weights, v)
    if not normalise:
        return y
    return y / (jnp.sum(weights, axis=-1).transpose(0, 2, 1)[..., None] + EPS)


class Favor(_Mixer):
    def __init__(self, num_heads, num_features: int, name=None):
        super().__init__(num_heads, name)
        self.num_features = num_features

    def __call__(self, x):
        q, k, v = project_qkv(x, self.num_heads)
        size = q.shape[-1]
        omega = hk.get_state("omega", (size, self.num_features), init=lambda shape, dtype:
                             orthogonal_gaussian(jax.random.key(17), size, self.num_features))
        scale = size ** -0.25
        y = kernel_attention(positive_random_features(q * scale, omega),
                             positive_random_features(k * scale, omega), v)
        return project_out(y, x.shape[-1])


class ReBased(_Mixer):
    def __call__(self, x):
        q, k, v = project_qkv(x, self.num_heads)
        size = q.shape[-1]
        gamma = hk.get_parameter("gamma", (size,), init=jnp.ones)
        beta = hk.get_parameter("beta", (size,), init=jnp.zeros)

        def phi(u):
            centred = u - u.mean(-1, keepdims=True)
            normed = centred / jnp.sqrt((centred ** 2).mean(-1, keepdims=True) + 1e-5)
            return (gamma * normed + beta) ** 2
        return project_out(kernel_attention(phi(q), phi(k), v), x.shape[-1])


class LinearAttention(_Mixer):
    def __init__(self, num_heads, scale: str = "sum", name=None):
        super().__init__(num_heads, name)
        self.scale = scale

    def __call__(self, x):
        q, k, v = project_qkv(x, self.num_heads)
        y = kernel_attention(q, k, v, normalise=False)                       # [B, T, H, K]
        if self.scale == "mean":
            y = y / jnp.arange(1, x.shape[1] + 1, dtype=y.dtype)[None, :, None, None]
        return project_out(y, x.shape[-1])


def _check(width: int, num_heads: int) -> None:
    if width % num_heads:
        raise ValueError(f"n_embd={width} must be divisible by n_head={num_heads}")


def register_mixer(name: str, options, doc: str, make, *, softmax: bool = False, state=None, state_doc: str = ""):
    """Register mixer `name`; `make(options, num_heads, module_name, position)` builds it. A
    softmax-family mixer takes any position encoding (it rotates q, k and adjusts scores); the
    others only those acting on the embeddings (require_plain). Options with a `check()` method
    are checked first (ValueError naming the option). `state(options, width, num_heads, tokens)`
    is the floats of recurrent state the mixer keeps per sequence and layer to produce its next
    output (what generation would carry: the keys and values of attention, a recurrent mixer's
    state), `state_doc` the same as a formula for `--choices`."""
    def build(opts, *, width: int, num_heads: int, position=None, name: str | None = None):
        _check(width, num_heads)
        if hasattr(opts, "check"):
            opts.check()
        if position is not None and not softmax:
            position.require_plain(build.mixer_name)
        return make(opts, num_heads, name, position if softmax else None)
    build.mixer_name = name
    build.takes_any_position = softmax
    build.forms_softmax_weights = softmax   # recorded under recording_attention (analysis.recency)
    build.state_floats, build.state_doc = state, state_doc
    MIXERS.register(name, options, doc=doc)(build)


def state_floats(name: str, options, *, width: int, num_heads: int, tokens: int) -> int:
    """Floats of recurrent state mixer `name` keeps per sequence and layer after `tokens` tokens
    (register_mixer's `state`)."""
    return int(MIXERS.get(name).build.state_floats(options, width, num_heads, tokens))


register_mixer("softmax_causal", SoftmaxOptions, "causal scaled dot-product softmax attention",
          lambda o, h, n, p: SoftmaxCausal(h, position=p, options=o, name=n), softmax=True,
          state=lambda o, d, h, t: 2 * t * d, state_doc="2·T·D (every key and value)")
register_mixer("local", LocalOptions, "causal softmax attention over the last `window` keys",
          lambda o, h, n, p: SoftmaxCausal(h, window=o.window, position=p, name=n), softmax=True,
          state=lambda o, d, h, t: 2 * min(t, o.window) * d, state_doc="2·min(T, window)·D")
register_mixer("local_global", LocalGlobalOptions, "limits_of_icl: causal softmax over a window of "
               "local_window_size keys plus global positions (global_attn_indices)",
               lambda o, h, n, p: SoftmaxCausal(h, window=o.local_window_size or None, position=p,
                                                global_positions=o.global_attn_indices, name=n), softmax=True,
               state=lambda o, d, h, t: 2 * d * (t if o.global_attn_indices or not o.local_window_size
                                                 else min(t, o.local_window_size)),
               state_doc="2·min(T, W)·D; 2·T·D with global positions")
register_mixer("mqa", NoOptions, "multi-query: H query heads share one key/value head",
          lambda o, h, n, p: SoftmaxCausal(h, kv_heads=1, position=p, name=n), softmax=True,
          state=lambda o, d, h, t: 2 * t * (d // h), state_doc="2·T·K (one key and value head)")
register_mixer("rela", NoOptions, "ReLU(q k / sqrt K) attention, gated RMSNorm output (ReLA)",
          lambda o, h, n, p: ReLA(h, name=n),
          state=lambda o, d, h, t: 2 * t * d, state_doc="2·T·D (every key and value)")
register_mixer("favor", FavorOptions, "FAVOR+ positive orthogonal random features, causal prefix sums",
          lambda o, h, n, p: Favor(h, o.num_features, name=n),
          state=lambda o, d, h, t: h * o.num_features * (d // h + 1), state_doc="H·m·(K + 1) (sums and normaliser)")
register_mixer("rebased", NoOptions, "ReBased: (gamma LN(u) + beta)^2 features, normalised prefix sums",
          lambda o, h, n, p: ReBased(h, name=n),
          state=lambda o, d, h, t: h * (d // h) * (d // h + 1), state_doc="H·K·(K + 1) (sums and normaliser)")
register_mixer("linear", LinearOptions, "plain causal linear attention, no normalisation (scale: sum) "
          "or divided by the visible tokens (scale: mean)",
          lambda o, h, n, p: LinearAttention(h, o.scale, name=n),
          state=lambda o, d, h, t: h * (d // h) ** 2, state_doc="H·K²")
