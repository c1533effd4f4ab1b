"""Position encodings as registered choices (registry "position"), for the length study (Lin et al.,
AAAI 2025: how position encodings affect length generalisation of in-context learning).

An encoding acts at one or more of three places, each a no-op unless it says otherwise:

  absolute(t, width)      [T, D] added to the token embeddings (learned, sinusoidal)
  rotate(q, k)            q, k [B, T, H, K] rotated by position (rope, yarn, dynamic_yarn)
  logits(scores)          scores [B, H, T, T] (query i, key j) -> adjusted scores: a bias that
                          depends on i − j (alibi, fire) and/or a temperature (yarn)
  query_scores(q)         [B, H, T, T] added to q kᵀ before the 1/√K scale: q_i · r_{i−j}, a
                          learned key vector per offset (relative)

  nope          nothing: positions are seen only through the causal mask
  learned       a learned table [L, D] (GPT-2's default; cannot index past L)
  sinusoidal    sin/cos of t / base^(2i/D), added (Vaswani et al. 2017)
  rope          rotary: pair (2i, 2i+1) of q and k rotated by t θ_i, θ_i = θ^(−2i/K), θ = 10⁴
  alibi         bias −m_h (i − j), head slopes m_h = 2^(−8h/H), h = 1..H (Press et al. 2022)
  fire          bias f_θ(ψ(i − j) / ψ(max(i, L))), ψ(x) = log(c x + 1), f a learned MLP
                1 -> hidden -> H, L a learned threshold (Li et al. 2023, "FIRE")
  yarn          RoPE whose frequencies are interpolated by scale s where their wavelength is
                long compared with the trained length (ramp between α and β rotations), and
                logits scaled by (0.1 ln s + 1)² (Peng et al. 2023, "YaRN")
  dynamic_yarn  YaRN with s = max(1, T / L_train): RoPE within the trained length
  relative      a learned key vector r_δ [H·K] per offset δ = i − j (0 to L − 1) of each
                layer, the score q_i·k_j + q_i·r_{i−j} (Shaw et al. 2018; the attention-only
                model of Edelman et al. 2024, statistical induction heads); cannot reach past L

Glossary: B batch, T tokens, H heads, K head size (even for the rotary ones), D width.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from src.registry import NoOptions, registry
from src.settings import require_int, require_number

POSITIONS = registry("position")


class Encoding:
    """The no-op at every place; subclasses override what they change."""

    name = "nope"
    kernel_friendly = True  # acts on the token embeddings only, so any mixer can take it

    def absolute(self, t: int, width: int) -> jax.Array | None:
        return None

    def rotate(self, q: jax.Array, k: jax.Array) -> tuple[jax.Array, jax.Array]:
        return q, k

    def logits(self, scores: jax.Array) -> jax.Array:
        return scores

    def query_scores(self, q: jax.Array) -> jax.Array | None:
        """[B, H, T, T] added to q kᵀ (before the scale) from q [B, T, H, K] alone, or None."""
        return None

    def max_tokens(self) -> int | None:
        """The longest sequence it can encode (None: any)."""
        return None

    def require_plain(self, mixer: str) -> None:
        """A mixer that never forms the [T, T] score matrix asks whether this encoding can
        work without one; ValueError (one line) when it cannot."""
        if not self.kernel_friendly:
            raise ValueError(
                f"model.position={self.name!r} acts inside softmax attention (on q, k "
                f"or the scores), which mixer {mixer!r} does not form; accepted with "
                "it: nope, learned, sinusoidal"
            )


# -- absolute -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LearnedOptions:
    max_tokens: int = 0  # table length; 0 = the model's (its max_tokens)
    truncated: bool = False  # initialise from a truncated normal (the Zoology recipe), else a normal

    def check(self) -> None:
        require_int("max_tokens", self.max_tokens, 0, 1_000_000)


class Learned(Encoding):
    name = "learned"

    def __init__(self, table_tokens: int, truncated: bool = False):
        self.table_tokens, self.truncated = table_tokens, truncated

    def absolute(self, t: int, width: int) -> jax.Array:
        if t > self.table_tokens:
            raise ValueError(
                f"{t} tokens exceed the learned position table ({self.table_tokens}); "
                "a learned absolute encoding cannot index past it"
            )
        init = (hk.initializers.TruncatedNormal if self.truncated else hk.initializers.RandomNormal)(0.02)
        table = hk.get_parameter("positions", (self.table_tokens, width), init=init)
        return table[:t]

    def max_tokens(self) -> int:
        return self.table_tokens


@dataclass(frozen=True)
class SinusoidalOptions:
    base: float = 10_000.0

    def check(self) -> None:
        require_number("base", self.base, 1.0, open_low=True)


def sinusoidal_table(t: int, width: int, base: float = 10_000.0) -> np.ndarray:
    """[T, D]: columns 2i, 2i+1 = sin, cos(t / base^(2i/D))."""
    positions = np.arange(t)[:, None]
    rates = base ** (-np.arange(0, width, 2) / width)
    table = np.zeros((t, width), np.float32)
    table[:, 0::2] = np.sin(positions * rates)
    table[:, 1::2] = np.cos(positions * rates)[:, : width // 2]
    return table


class Sinusoidal(Encoding):
    name = "sinusoidal"

    def __init__(self, base: float):
        self.base = base

    def absolute(self, t: int, width: int) -> jax.Array:
        return jnp.asarray(sinusoidal_table(t, width, self.base))


# -- rotary ---------------------------------------------------------------------------------------


def rope_frequencies(head_size: int, theta: float = 10_000.0) -> np.ndarray:
    """θ_i = θ^(−2i/K), i = 0..K/2−1 (radians per position)."""
    if head_size % 2:
        raise ValueError(f"rotary encodings need an even head size; got {head_size}")
    return theta ** (-np.arange(0, head_size, 2) / head_size)


def yarn_frequencies(
    head_size: int, theta: float, scale: float, original_tokens: int, alpha: float = 1.0, beta: float = 32.0
) -> np.ndarray:
    """YaRN's "NTK-by-parts" frequencies: with r_i = L / λ_i (rotations of dimension pair i over
    the trained length L, λ_i = 2π / θ_i) and the ramp γ = clip((r − α) / (β − α), 0, 1),
    θ'_i = (1 − γ) θ_i / s + γ θ_i: long wavelengths are interpolated, short ones kept."""
    freqs = rope_frequencies(head_size, theta)
    rotations = original_tokens * freqs / (2 * math.pi)
    ramp = np.clip((rotations - alpha) / (beta - alpha), 0.0, 1.0)
    return (1.0 - ramp) * freqs / scale + ramp * freqs


def yarn_logit_scale(scale: float) -> float:
    """YaRN's attention temperature: logits × (0.1 ln s + 1)² (1 for s <= 1)."""
    return (0.1 * math.log(scale) + 1.0) ** 2 if scale > 1.0 else 1.0


def apply_rotary(x: jax.Array, freqs) -> jax.Array:
    """Rotate pair (2i, 2i+1) of x [B, T, H, K] at position t by t θ_i; freqs [K/2] or [T, K/2]."""
    t = x.shape[1]
    freqs = jnp.asarray(freqs, x.dtype)
    angles = (jnp.arange(t, dtype=x.dtype)[:, None] * freqs) if freqs.ndim == 1 else freqs
    cos, sin = jnp.cos(angles)[None, :, None, :], jnp.sin(angles)[None, :, None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    return jnp.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1).reshape(x.shape)


@dataclass(frozen=True)
class RopeOptions:
    theta: float = 10_000.0

    def check(self) -> None:
        require_number("theta", self.theta, 1.0, open_low=True)


class Rope(Encoding):
    name = "rope"
    kernel_friendly = False

    def __init__(self, theta: float):
        self.theta = theta

    def frequencies(self, head_size: int, t: int) -> np.ndarray:
        return rope_frequencies(head_size, self.theta)

    def rotate(self, q, k):
        freqs = self.frequencies(q.shape[-1], q.shape[1])
        return apply_rotary(q, freqs), apply_rotary(k, freqs)


@dataclass(frozen=True)
class DynamicYarnOptions:
    original_tokens: int = 0  # L_train in tokens; 0 = the model's trained length
    theta: float = 10_000.0
    alpha: float = 1.0  # YaRN's ramp: rotations over L_train below alpha: interpolated,
    beta: float = 32.0  # above beta: kept

    def check(self) -> None:
        require_int("original_tokens", self.original_tokens, 0, 1_000_000)
        require_number("theta", self.theta, 1.0, open_low=True)
        require_number("alpha", self.alpha, 0.0)
        require_number("beta", self.beta, self.alpha, open_low=True)


@dataclass(frozen=True)
class YarnOptions(DynamicYarnOptions):
    scale: float = 2.0  # s: the context extension factor

    def check(self) -> None:
        super().check()
        require_number("scale", self.scale, 0.0, open_low=True)


class Yarn(Rope):
    name = "yarn"

    def __init__(self, options: YarnOptions, trained_tokens: int):
        super().__init__(options.theta)
        self.options = options
        self.trained_tokens = options.original_tokens or trained_tokens

    def scale_for(self, t: int) -> float:
        return self.options.scale

    def frequencies(self, head_size: int, t: int) -> np.ndarray:
        o = self.options
        return yarn_frequencies(head_size, o.theta, self.scale_for(t), self.trained_tokens, o.alpha, o.beta)

    def logits(self, scores):
        return scores * yarn_logit_scale(self.scale_for(scores.shape[-1]))


class DynamicYarn(Yarn):
    name = "dynamic_yarn"

    def __init__(self, options: DynamicYarnOptions, trained_tokens: int):
        super().__init__(YarnOptions(scale=1.0, **dataclasses.asdict(options)), trained_tokens)

    def scale_for(self, t: int) -> float:
        return max(1.0, t / self.trained_tokens)


# -- score biases -------------------------------------------------------------------------------


def alibi_slopes(num_heads: int) -> np.ndarray:
    """m_h = 2^(−8h/H), h = 1..H."""
    return 2.0 ** (-8.0 * np.arange(1, num_heads + 1) / num_heads)


def relative_distance(t: int) -> np.ndarray:
    """[T, T]: i − j (query i, key j)."""
    return np.arange(t)[:, None] - np.arange(t)[None, :]


class Alibi(Encoding):
    name = "alibi"
    kernel_friendly = False

    def logits(self, scores):
        heads, t = scores.shape[1], scores.shape[-1]
        bias = -alibi_slopes(heads)[:, None, None] * relative_distance(t)[None]
        return scores + jnp.asarray(bias, scores.dtype)[None]


@dataclass(frozen=True)
class FireOptions:
    hidden: int = 32  # width of the MLP f
    c: float = 1.0  # initial c of ψ(x) = log(c x + 1) (learned)
    threshold: float = 0.0  # initial L of the normaliser ψ(max(i, L)) (learned); 0 = trained length

    def check(self) -> None:
        require_int("hidden", self.hidden, 1, 16_384)
        require_number("c", self.c, 0.0, open_low=True)
        require_number("threshold", self.threshold, 0.0)


def fire_features(t: int, c, threshold) -> jax.Array:
    """[T, T]: ψ(i − j) / ψ(max(i, L)) for j <= i (0 above the diagonal), ψ(x) = log(|c| x + 1)."""
    distance = jnp.maximum(jnp.asarray(relative_distance(t), jnp.float32), 0.0)
    query = jnp.arange(t, dtype=jnp.float32)[:, None]
    psi = lambda x: jnp.log(jnp.abs(c) * x + 1.0)
    return psi(distance) / psi(jnp.maximum(query, jnp.abs(threshold)) + 1e-6)


class Fire(Encoding):
    name = "fire"
    kernel_friendly = False

    def __init__(self, options: FireOptions, trained_tokens: int):
        self.options = options
        self.threshold = options.threshold or float(trained_tokens)

    def logits(self, scores):
        heads, t = scores.shape[1], scores.shape[-1]
        c = hk.get_parameter("fire_c", (), init=hk.initializers.Constant(self.options.c))
        threshold = hk.get_parameter("fire_threshold", (), init=hk.initializers.Constant(self.threshold))
        features = fire_features(t, c, threshold)[..., None]  # [T, T, 1]
        hidden = jax.nn.relu(hk.Linear(self.options.hidden, name="fire_in")(features))
        bias = hk.Linear(heads, name="fire_out")(hidden)  # [T, T, H]
        return scores + jnp.transpose(bias, (2, 0, 1))[None].astype(scores.dtype)


@dataclass(frozen=True)
class RelativeOptions:
    max_tokens: int = 0  # offsets 0 to max_tokens − 1 have a vector; 0 = the model's max_tokens

    def check(self) -> None:
        require_int("max_tokens", self.max_tokens, 0, 1_000_000)


class Relative(Encoding):
    """Learned relative key vectors (Shaw et al. 2018), one table per layer: parameter
    `relative_keys` [L, H·K] of the attention module, drawn from N(0, 0.02²)."""

    name = "relative"
    kernel_friendly = False

    def __init__(self, table_tokens: int):
        self.table_tokens = table_tokens

    def query_scores(self, q):
        b, t, heads, size = q.shape
        if t > self.table_tokens:
            raise ValueError(f"{t} tokens exceed the relative position table ({self.table_tokens} offsets)")
        table = hk.get_parameter(
            "relative_keys", (self.table_tokens, heads * size), init=hk.initializers.RandomNormal(0.02)
        )
        offsets = np.maximum(relative_distance(t), 0)  # keys after the query are masked anyway
        keys = table[offsets].reshape(t, t, heads, size).astype(q.dtype)  # r_{i−j} [T(i), T(j), H, K]
        return jnp.einsum("bihk,ijhk->bhij", q, keys)

    def max_tokens(self) -> int:
        return self.table_tokens


# -- registry -----------------------------------------------------------------------------------
# Builders: (options, *, trained_tokens) -> Encoding; trained_tokens = the longest sequence the
# model is trained on (the learned table's length, YaRN's L_train).

POSITIONS.register("nope", NoOptions, doc="no position encoding (the causal mask only)")(
    lambda options, *, trained_tokens: Encoding()
)
POSITIONS.register("learned", LearnedOptions, doc="learned absolute table (GPT-2)")(
    lambda options, *, trained_tokens: Learned(options.max_tokens or trained_tokens, options.truncated)
)
POSITIONS.register("sinusoidal", SinusoidalOptions, doc="added sin/cos table")(
    lambda options, *, trained_tokens: Sinusoidal(options.base)
)
POSITIONS.register("rope", RopeOptions, doc="rotary q/k, theta 1e4")(
    lambda options, *, trained_tokens: Rope(options.theta)
)
POSITIONS.register("alibi", NoOptions, doc="linear bias -m_h (i - j), m_h = 2^(-8h/H)")(
    lambda options, *, trained_tokens: Alibi()
)
POSITIONS.register("fire", FireOptions, doc="learned MLP of the progressively normalised log distance")(
    lambda options, *, trained_tokens: Fire(options, trained_tokens)
)
POSITIONS.register("yarn", YarnOptions, doc="RoPE with YaRN interpolation and temperature, scale s")(
    lambda options, *, trained_tokens: _yarn(options, trained_tokens)
)
POSITIONS.register("relative", RelativeOptions, doc="learned key vector per offset i - j (Shaw et al.)")(
    lambda options, *, trained_tokens: Relative(options.max_tokens or trained_tokens)
)
POSITIONS.register("dynamic_yarn", DynamicYarnOptions, doc="YaRN with s = max(1, T / L_train), recomputed per length")(
    lambda options, *, trained_tokens: DynamicYarn(options, trained_tokens)
)


def _yarn(options: YarnOptions, trained_tokens: int) -> Yarn:
    if not (isinstance(options.scale, (int, float)) and math.isfinite(options.scale) and options.scale > 0):
        raise ValueError(f"position yarn scale={options.scale!r} is not accepted; accepted: a finite number > 0")
    return Yarn(options, trained_tokens)
