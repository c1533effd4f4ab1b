"""The linear-attention models of the training-dynamics study (Zhang et al., ICML 2025), registry
"dynamics_model". No residual, no 1/N (unless `normalize`), the prediction is the query's
y entry, as in the original's code.

  attn_merged   ATTN_M: ŷ = Σ_h v_hᵀ (X Xᵀ) W_KQ,h x̃_q      v_h ∈ R^{D+1}, W_KQ,h ∈ R^{(D+1)×(D+1)}
                (restricted: v_h = [0, a_h] reads y only, W_KQ,h = [[B_h, 0], [0, 0]] reads x only)
  attn_separate ATTN_S: as ATTN_M with W_KQ,h = W_K,hᵀ W_Q,h,  W_K,h, W_Q,h ∈ R^{R×(D+1)}
  cubic_mlp     a two-layer linear network on the cubic feature z = (Σ_n y_n x_n) x_qᵀ ∈ R^{D×D}:
                ŷ = Σ_h a_h ⟨B_h, z⟩

X Xᵀ = Σ_tokens x̃ x̃ᵀ over all T tokens (the query's y is 0), x̃_q = [x_q; 0]. The restricted
ATTN_M is the same function as cubic_mlp with the same (a, B): v_hᵀ X Xᵀ W_KQ,h x̃_q =
a_h Σ_n y_n x_nᵀ B_h x_q (`mlp_params_from_restricted` is the parameter map).

Every model is linear in a coefficient tensor t(θ) of fixed features F of a sequence,
ŷ = F · t(θ): attention F = X Xᵀ ⊗ x̃_q, t = Σ_h v_h ⊗ W_KQ,h ((D+1)³ entries); cubic_mlp
F = vec(z), t = Σ_h a_h B_h (D² entries). Full-batch training uses this (src/systems/dynamics.py).
The attention models with softmax scoring (the original's --softmax) are not linear in any fixed
features: their direct forward pass and loss are src/models/dynamics_softmax.py.

Initialisation (`init`, INIT_CONVENTIONS): "original" draws as the original code does for its
`--init`: ATTN_S's W_K, W_Q, W_V have std init/√(entries of the torch layer) (H·R·(D+1) and
H·(D+1)²: 0.01/5 and 0.01/√125 for --head 5 --init 1e-2 at D = 4), W_K's y column is 0; ATTN_M
and the MLP have std init, ATTN_M's W_KQ,h[key y, query x] is 0; both attention models start
with the value's x entries at 0. "paper" is the code the paper's figures were made with (May
2025, before the original's commit 6d24121 put all heads in one layer): ATTN_S's W_K, W_Q with
std init/√(R·(D+1)) per head and W_V with std init. "uniform" draws every entry with std init.

Shapes: P sequences, T tokens, D input dimension, H heads (hidden units), R rank, F features.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, ClassVar, Mapping

import jax
import jax.numpy as jnp

from src.registry import registry
from src.settings import require_int

MODELS = registry("dynamics_model")


@dataclass(frozen=True)
class AttnMergedOptions:
    heads: int = 1
    restricted: bool = False  # value reads y only, W_KQ reads x only (= cubic_mlp)

    def check(self) -> None:
        require_int("heads", self.heads, 1, 256)


@dataclass(frozen=True)
class AttnSeparateOptions:
    heads: int = 1
    rank: int = 1  # R: W_KQ,h = W_K,hᵀ W_Q,h has rank <= R

    def check(self) -> None:
        require_int("heads", self.heads, 1, 256)
        require_int("rank", self.rank, 1, 4096)


@dataclass(frozen=True)
class CubicMLPOptions:
    reads_cubic_feature: ClassVar[bool] = True  # the original's --cubic_feat
    heads: int = 1  # hidden units

    def check(self) -> None:
        require_int("heads", self.heads, 1, 256)


INIT_CONVENTIONS = {
    "original": "the original code's draw (its net.py since 2025-12-28): ATTN_S std init/√(entries "
    "of its torch layer, all heads in one), ATTN_M and the MLP std init; W_K's y column "
    "(ATTN_S), W_KQ's key-y/query-x block (ATTN_M) and the value's x entries start at 0",
    "paper": "as original, with the layers of the code the paper's figures were made with (before "
    "its commit 6d24121): ATTN_S's W_K, W_Q per head (std init/√(R·(D+1))), W_V std init",
    "uniform": "every entry ~ init·N(0, 1) (this workbench's convention before 2026-11-25)",
}


@dataclass(frozen=True)
class OriginalInit:
    """How the original code draws one model: per convention ("original", "paper"), D -> {param:
    the number of entries of the torch layer it comes from} (std = init/√entries; a parameter
    not named: std = init), and the entries set to 0."""

    entries: Mapping[str, Callable[[int], dict[str, int]]] = field(default_factory=dict)
    zero: Callable[[dict], dict] = lambda params: params  # params -> params with zeros


@dataclass(frozen=True)
class DynamicsModel:
    """Pure functions of one model. params: dict name -> array."""

    shapes: Callable[[int], dict[str, tuple[int, ...]]]  # D -> parameter shapes
    coefficients: Callable[[dict], jax.Array]  # params -> t [F]
    features: Callable[[jax.Array, bool], jax.Array]  # tokens [P,T,D+1], normalize -> [P, F]
    predict: Callable[[dict, jax.Array, bool], jax.Array]  # direct forward -> ŷ [P]
    kq: Callable[[dict], jax.Array]  # [H, n, n] key-query maps
    gamma: Callable[[dict], jax.Array]  # [H, D, D] per head: h -> ŷ/x_q
    original_init: OriginalInit = OriginalInit()
    value_y: Callable[[dict], jax.Array] | None = None  # [H] each head's value y -> y weight (attention)
    values: Callable[[dict], jax.Array] | None = None  # [H, D+1] each head's value v_h (attention)

    def init(self, key: jax.Array, in_dim: int, scale: float, convention: str = "original") -> dict:
        """The initial parameters (small initialisation; `convention` in INIT_CONVENTIONS). Both
        conventions scale the same standard-normal draws."""
        shapes = self.shapes(in_dim)
        keys = jax.random.split(key, len(shapes))
        draws = {name: jax.random.normal(k, shape) for k, (name, shape) in zip(keys, sorted(shapes.items()))}
        if convention == "uniform":
            return {name: scale * z for name, z in draws.items()}
        entries = self.original_init.entries.get(convention, lambda d: {})(in_dim)
        return self.original_init.zero(
            {name: scale / entries[name] ** 0.5 * z if name in entries else scale * z for name, z in draws.items()}
        )


def gram(tokens: jax.Array, normalize: bool) -> jax.Array:
    """X Xᵀ per sequence [P, D+1, D+1] (divided by N = T-1 context pairs when normalize)."""
    m = jnp.einsum("ptd,pte->pde", tokens, tokens)
    return m / (tokens.shape[1] - 1) if normalize else m


def cubic_feature(tokens: jax.Array, normalize: bool) -> jax.Array:
    """z = (Σ_n y_n x_n) x_qᵀ per sequence [P, D, D] (/N when normalize)."""
    h = jnp.einsum("pt,ptd->pd", tokens[:, :-1, -1], tokens[:, :-1, :-1])
    z = jnp.einsum("pd,pe->pde", h, tokens[:, -1, :-1])
    return z / (tokens.shape[1] - 1) if normalize else z


def _attention(
    values: Callable, maps: Callable, shapes: Callable, original_init: OriginalInit = OriginalInit()
) -> DynamicsModel:
    """An attention model from v(params) [H, D+1] and W_KQ(params) [H, D+1, D+1]."""

    def coefficients(params):
        return jnp.einsum("hi,hjk->ijk", values(params), maps(params)).reshape(-1)

    def features(tokens, normalize):
        return jnp.einsum("pij,pk->pijk", gram(tokens, normalize), tokens[:, -1]).reshape(tokens.shape[0], -1)

    def predict(params, tokens, normalize):
        return jnp.einsum("hi,pij,hjk,pk->p", values(params), gram(tokens, normalize), maps(params), tokens[:, -1])

    def gamma(params):
        """Per head, the bilinear map between h = Σ_n y_n x_n and x_q in ŷ (the terms of
        v_hᵀ X Xᵀ W_h x̃_q linear in h): v_h,y W_h,xx + v_h,x ⊗ W_h,yx  [H, D, D]."""
        v, w = values(params), maps(params)
        return v[:, -1, None, None] * w[:, :-1, :-1] + jnp.einsum("hi,hj->hij", v[:, :-1], w[:, -1, :-1])

    return DynamicsModel(
        shapes,
        coefficients,
        features,
        predict,
        maps,
        gamma,
        original_init,
        lambda params: values(params)[:, -1],
        values,
    )


def _restricted_values(params):
    heads, d = params["value_y"].shape[0], params["kq_x"].shape[-1]
    return jnp.zeros((heads, d + 1)).at[:, -1].set(params["value_y"])


def _restricted_maps(params):
    heads, d = params["kq_x"].shape[0], params["kq_x"].shape[-1]
    return jnp.zeros((heads, d + 1, d + 1)).at[:, :d, :d].set(params["kq_x"])


@MODELS.register(
    "attn_merged", AttnMergedOptions, doc="ATTN_M: per head a merged W_KQ and a value vector (restricted: = cubic_mlp)"
)
def build_attn_merged(options: AttnMergedOptions) -> DynamicsModel:
    h = options.heads
    if options.restricted:
        return _attention(_restricted_values, _restricted_maps, lambda d: {"value_y": (h,), "kq_x": (h, d, d)})
    return _attention(
        lambda p: p["value"],
        lambda p: p["kq"],
        lambda d: {"value": (h, d + 1), "kq": (h, d + 1, d + 1)},
        OriginalInit(zero=_zero_merged),
    )


def _zero_value_x(params: dict) -> dict:
    """The value's x entries (the original zeroes the y-output row's x columns of W_V)."""
    return {**params, "value": params["value"].at[:, :-1].set(0.0)}


def _zero_merged(params: dict) -> dict:
    """ATTN_M: the value's x entries and W_KQ,h[key y, query x] (the original's
    kq.weight[h(D+1) : h(D+1)+D, -1], its rows indexing the query)."""
    params = _zero_value_x(params)
    return {**params, "kq": params["kq"].at[:, -1, :-1].set(0.0)}


def _zero_separate(params: dict) -> dict:
    """ATTN_S: the value's x entries and W_K's y column."""
    params = _zero_value_x(params)
    return {**params, "key": params["key"].at[:, :, -1].set(0.0)}


@MODELS.register("attn_separate", AttnSeparateOptions, doc="ATTN_S: per head W_K, W_Q of rank R and a value vector")
def build_attn_separate(options: AttnSeparateOptions) -> DynamicsModel:
    h, r = options.heads, options.rank
    # the original's torch layers: key, query Linear(D+1 -> H·R), value Linear(D+1 -> H·(D+1));
    # before its commit 6d24121 one Linear(D+1 -> R) per head for key and query, value std init
    entries = {
        "original": lambda d: {"key": h * r * (d + 1), "query": h * r * (d + 1), "value": h * (d + 1) ** 2},
        "paper": lambda d: {"key": r * (d + 1), "query": r * (d + 1)},
    }
    return _attention(
        lambda p: p["value"],
        lambda p: jnp.einsum("hri,hrj->hij", p["key"], p["query"]),
        lambda d: {"value": (h, d + 1), "key": (h, r, d + 1), "query": (h, r, d + 1)},
        OriginalInit(entries, _zero_separate),
    )


@MODELS.register("cubic_mlp", CubicMLPOptions, doc="two-layer linear network on the cubic feature z = (Σ y_n x_n) x_qᵀ")
def build_cubic_mlp(options: CubicMLPOptions) -> DynamicsModel:
    h = options.heads

    def coefficients(params):
        return jnp.einsum("h,hde->de", params["readout"], params["hidden"]).reshape(-1)

    def features(tokens, normalize):
        return cubic_feature(tokens, normalize).reshape(tokens.shape[0], -1)

    def predict(params, tokens, normalize):
        return jnp.einsum("h,hde,pde->p", params["readout"], params["hidden"], cubic_feature(tokens, normalize))

    return DynamicsModel(
        lambda d: {"readout": (h,), "hidden": (h, d, d)},
        coefficients,
        features,
        predict,
        lambda p: p["hidden"],
        lambda p: p["readout"][:, None, None] * p["hidden"],
    )


def mlp_params_from_restricted(params: dict) -> dict:
    """The cubic_mlp parameters computing the same function as restricted ATTN_M `params`."""
    return {"readout": params["value_y"], "hidden": params["kq_x"]}
