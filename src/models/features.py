"""Models of von Oswald et al.'s non-linear regression (registry "nonlinear_model"): a
transformer whose MLP block learns features on which its linear self-attention layer takes a GD
step, and the explicit version of that mechanism, the baseline it is compared with.

  mlp_lsa      tokens e_i = [x_i, y_i], query [x_q, 0] -> embedding E (D, no bias) -> residual
               MLP block h = e + W₂ gelu(W₁ e + b₁) + b₂ (hidden widening·D) -> one linear
               self-attention layer (one head, key size D; keys and values from the N context
               tokens, as the paper's LSA) -> ŷ = −(query token)[last channel]
               (the reference notebook: emb_size 40, widening 4, init 0.002, no layer norm)
  features_gd  learned features φ(x) = E x + MLP(E x) of the inputs alone and one step of GD
               from W₀ = 0 on them with a learned step size:
               ŷ = (η/N) Σ_i y_i φ(x_i)·φ(x_q)   (the notebook's "MLP + GD"; init 0.02)

Both read prompts (src/tasks/pairs.py, drawn by src/tasks/nonlinear.py) and return ŷ [B].
Shapes: B tasks, N context pairs, d input dimension, D width, T = N + 1 tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp

from src.registry import registry
from src.settings import require_int, require_number

MODELS = registry("nonlinear_model")


@dataclass(frozen=True)
class FeatureOptions:
    width: int = 40  # D: embedding and key size (the notebook's emb_size / key_size)
    widening: int = 4  # the MLP's hidden width is widening · D
    init_scale: float = 0.002  # VarianceScaling scale of every weight

    def check(self) -> None:
        require_int("width", self.width, 1)
        require_int("widening", self.widening, 1)
        require_number("init_scale", self.init_scale, 0, open_low=True)


@dataclass(frozen=True)
class FeaturesGDOptions(FeatureOptions):
    init_scale: float = 0.02  # the notebook's GD model
    eta_init: float = 1.0  # the learned step size's initial value

    def check(self) -> None:
        super().check()
        require_number("eta_init", self.eta_init, 0, open_low=True)


class FeatureModel(NamedTuple):
    name: str
    options: Any
    init: Callable[[jax.Array, Any], Any]  # (key, tasks) -> params
    apply: Callable[[Any, Any], jax.Array]  # (params, tasks) -> ŷ [B]


def _embed_and_mlp(inputs: jax.Array, options: FeatureOptions) -> jax.Array:
    """[..., k] -> [..., D]: a linear embedding plus a residual gelu MLP on it."""
    w_init = hk.initializers.VarianceScaling(options.init_scale)
    width = options.width
    e = hk.Linear(width, with_bias=False, w_init=w_init, name="emb")(inputs)
    hidden = jax.nn.gelu(hk.Linear(options.widening * width, w_init=w_init, name="mlp_in")(e))
    return e + hk.Linear(width, w_init=w_init, name="mlp_out")(hidden)


def _mlp_lsa(tasks, options: FeatureOptions) -> jax.Array:
    n = tasks.context_x.shape[1]
    context = jnp.concatenate([tasks.context_x, tasks.context_y[..., None]], -1)  # [B, N, d+1]
    query = jnp.concatenate([tasks.query_x, jnp.zeros_like(tasks.query_y)[:, None]], -1)
    h = _embed_and_mlp(jnp.concatenate([context, query[:, None]], 1), options)  # [B, T, D]
    w_init = hk.initializers.VarianceScaling(options.init_scale)
    width = options.width

    def proj(name):
        return hk.Linear(width, with_bias=False, w_init=w_init, name=name)

    h_query = h[:, n]  # [B, D]
    scores = jnp.einsum("bk,bnk->bn", proj("query")(h_query), proj("key")(h[:, :n]))  # [B, N]
    update = jnp.einsum("bn,bnk->bk", scores, proj("value")(h[:, :n]))  # [B, D]
    # only the query token's output is read, so only its update is computed (one layer)
    return -(h_query + proj("output")(update))[:, -1]


def _features_gd(tasks, options: FeaturesGDOptions) -> jax.Array:
    n = tasks.context_x.shape[1]
    phi = _embed_and_mlp(jnp.concatenate([tasks.context_x, tasks.query_x[:, None]], 1), options)
    eta = hk.get_parameter("eta", [], init=hk.initializers.Constant(options.eta_init))
    return eta / n * jnp.einsum("bn,bnk,bk->b", tasks.context_y, phi[:, :n], phi[:, n])


def _build(name: str, forward) -> Callable[[Any], FeatureModel]:
    def build(options) -> FeatureModel:
        def named(tasks):
            with hk.name_scope(name):  # parameters "<name>/emb", "<name>/query", ...
                return forward(tasks, options)

        f = hk.without_apply_rng(hk.transform(named))
        return FeatureModel(name, options, f.init, f.apply)

    return build


MODELS.register("mlp_lsa", FeatureOptions, doc="von Oswald et al.: an MLP block, then one linear self-attention layer")(
    _build("mlp_lsa", _mlp_lsa)
)
MODELS.register(
    "features_gd", FeaturesGDOptions, doc="learned MLP features of x and one GD step on them with a learned step size"
)(_build("features_gd", _features_gd))
