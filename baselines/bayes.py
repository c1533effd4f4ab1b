"""Bayes-optimal predictors for noisy linear regression (Raventós et al. 2023's baselines), as
predictions at every point like baselines/regression.py: ŷ_i from the pairs before i.

  ridge  the posterior mean of w under the Gaussian prior w ~ N(0, τ² I) with noise N(0, σ²):
         ŵ_i = (X_<iᵀ X_<i + (σ²/τ²) I)⁻¹ X_<iᵀ y_<i  (least squares as τ grows)
  dmmse  the posterior mean of w over a finite pool {w_1 .. w_M} drawn uniformly (the pool a
         model was trained on; src/tasks/pools.py): ŵ_i = Σ_k p_ik w_k with
         p_ik ∝ exp(−Σ_{j<i} (y_j − x_j·w_k)² / 2σ²)

Both map prompts (src/tasks/pairs.py: xs [B, n, d], ys [B, n]) -> ŷ [B, n] (ŷ_0 = 0 for ridge, the
pool's mean for dMMSE).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from baselines.regression import BASELINES, _all_regression, _prefix_masks
from src.settings import require_number
from src.tasks.pairs import PairPrompt


def ridge(prompt: PairPrompt, noise_std: float, prior_std: float = 1.0):
    """[B, n]: each point's prediction by the ridge (Gaussian posterior mean) fit of the pairs before it."""
    xs, ys = prompt.xs, prompt.ys
    masks = _prefix_masks(xs.shape[1])  # [n(i), n(j)]
    gram = jnp.einsum("ij,bjd,bje->bide", masks, xs, xs)  # [B, n, d, d]
    moment = jnp.einsum("ij,bjd,bj->bid", masks, xs, ys)  # [B, n, d]
    ridge_term = (noise_std / prior_std) ** 2 * jnp.eye(xs.shape[-1])
    w = jnp.linalg.solve(gram + ridge_term, moment[..., None])[..., 0]  # [B, n, d]
    return jnp.einsum("bnd,bnd->bn", xs, w)


def dmmse(prompt: PairPrompt, pool, noise_std: float):
    """[B, n]: each point's prediction by the posterior mean over the pool [M, d] given the pairs before it."""
    xs, ys = prompt.xs, prompt.ys
    masks = _prefix_masks(xs.shape[1])
    squared = (ys[..., None] - jnp.einsum("bjd,md->bjm", xs, pool)) ** 2  # [B, n(j), M]
    log_posterior = -jnp.einsum("ij,bjm->bim", masks, squared) / (2 * noise_std**2)
    w = jnp.einsum("bim,md->bid", jax.nn.softmax(log_posterior, axis=-1), pool)  # [B, n, d]
    return jnp.einsum("bnd,bnd->bn", xs, w)


@dataclass(frozen=True)
class RidgeOptions:
    noise_std: float = 0.5  # σ, the label noise the prior assumes (Garg's noisy_linear_regression default)
    prior_std: float = 1.0  # τ, w ~ N(0, τ² I)

    def check(self) -> None:
        require_number("noise_std", self.noise_std, 0.0)
        require_number("prior_std", self.prior_std, 0.0, open_low=True)


BASELINES.register(
    "ridge",
    RidgeOptions,
    applies=_all_regression,
    doc="ridge: the Gaussian prior's posterior mean (lambda = noise_std^2 / prior_std^2)",
)(lambda options: lambda prompt: ridge(prompt, options.noise_std, options.prior_std))
