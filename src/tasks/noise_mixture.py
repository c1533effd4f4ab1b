"""Algorithm selection's task (Bai et al., NeurIPS 2023, "Transformers as Statisticians"): noisy
linear regressions of several noise levels in one training distribution, so that one model must
pick the right estimator for the noise in front of it.

  noise_mixture_regression   y = x·w + σ·ε, x ~ N(0, I_d), w ~ N(0, I_d / d) (Bai et al.'s prior;
                             `unit_prior` for Garg et al.'s N(0, I_d)), σ taken round-robin over
                             `noise_stds` by prompt: prompt b of every batch has σ = noise_stds[b mod K]

Bai et al. take σ round-robin over training steps; here every batch (and the eval set) holds the
levels in equal shares, which gives the same mixture with no step in the sampler. With one level,
`noise_stds: [0.5]`, it is a single-noise task (the comparison models). The Bayes estimator of a
level is ridge at λ = dσ² (baselines/ridge.py); the prompts' σ are in PairPrompt order, so an
evaluation reads a level's prompts as every K-th row.

Glossary: B prompts, n points, d dims, K noise levels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from src.registry import registry
from src.settings import SettingsError, require_number
from src.tasks.pairs import PairPrompt


@dataclass(frozen=True)
class NoiseMixtureOptions:
    objective: ClassVar[str] = "regression"  # registry "objective": squared error / d
    noise_stds: tuple = (0.1, 0.5)  # σ of each level, taken round-robin by prompt
    unit_prior: bool = False  # w ~ N(0, I) (Garg et al.) instead of N(0, I / d) (Bai et al.)

    def check(self) -> None:
        if isinstance(self.noise_stds, (str, bytes)) or not isinstance(self.noise_stds, (tuple, list)):
            raise SettingsError(f"noise_stds={self.noise_stds!r} is not accepted; accepted: a list of numbers >= 0")
        if not self.noise_stds or len(self.noise_stds) > 16:
            raise SettingsError(f"noise_stds={list(self.noise_stds)!r} is not accepted; accepted: 1 to 16 levels")
        for sigma in self.noise_stds:
            require_number("noise_stds", sigma, 0.0)
        if not isinstance(self.unit_prior, bool):
            raise SettingsError(f"unit_prior={self.unit_prior!r} is not accepted; accepted: true or false")


def noise_levels(options: NoiseMixtureOptions, batch_size: int) -> np.ndarray:
    """[B] σ of each prompt: noise_stds[b mod K]."""
    stds = np.asarray(options.noise_stds, np.float32)
    return stds[np.arange(batch_size) % len(stds)]


def make_sampler(options: NoiseMixtureOptions, n_points: int, n_dims: int):
    """(key, batch_size, dims, points, alpha=1, task_keys=None) -> PairPrompt [B, n_points, n_dims]."""
    prior_std = 1.0 if options.unit_prior else None

    def sample(key, batch_size: int, dims, points, alpha: float = 1.0, task_keys=None) -> PairPrompt:
        k_x, k_w, k_e = jax.random.split(key, 3)
        active = jnp.arange(n_dims) < dims
        xs = jnp.where(active, alpha * jax.random.normal(k_x, (batch_size, n_points, n_dims)), 0.0)
        if task_keys is None:
            w = jax.random.normal(k_w, (batch_size, n_dims))
        else:
            w = jax.vmap(lambda k: jax.random.normal(k, (n_dims,)))(task_keys)
        scale = prior_std if prior_std is not None else 1.0 / jnp.sqrt(jnp.asarray(dims, jnp.float32))
        w = jnp.where(active, w * scale, 0.0)
        sigma = jnp.asarray(noise_levels(options, batch_size))[:, None]
        ys = jnp.einsum("bnd,bd->bn", xs, w) + sigma * jax.random.normal(k_e, (batch_size, n_points))
        weights = (jnp.arange(n_points) < points).astype(jnp.float32)[None].repeat(batch_size, 0)
        return PairPrompt(xs, ys, weights, w, jnp.asarray(dims, jnp.float32))

    return sample


registry("task").register(
    "noise_mixture_regression",
    NoiseMixtureOptions,
    doc="Bai et al.'s algorithm selection: noisy regressions, σ round-robin over noise_stds, w ~ N(0, I/d)",
)(lambda options, n_points=11, n_dims=5: make_sampler(options, n_points, n_dims))
