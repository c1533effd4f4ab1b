"""In-context linear regression as the training-dynamics study defines it (Zhang, Singh,
Latham & Saxe, ICML 2025, arXiv 2501.16265).

A FIXED training set of P sequences (not fresh tasks every step). Sequence p has T tokens
[x; y] ∈ R^{D+1}: T−1 context pairs and the query, whose y is set to 0 in the input; the
target is the query's y = w_p · x_q.

  x ~ N(0, Λ), Λ = diag(λ_1..λ_D), λ_i ∝ i with trace 1 (or Λ = I/D with white_cov);
  x is centred over the sequences of a set (per token position), as the original code does.
  task vectors: a fraction `icl` of the sequences get their own w ~ N(0, I), whitened over
  the set (their empirical second moment is exactly I); the others share one fixed w*.
  test sets (testset_size each): in-context (fresh random w per sequence) and in-weight
  (w* at the query, context labels pure N(0, 1) noise, so only a memorised w* helps).

Principal direction i of Λ is coordinate axis i; the largest eigenvalue is the last axis.
Pure numpy (float64) from one seed: the sets are drawn once, so the study is exactly
reproducible and independent of JAX's random streams.

Glossary of shapes: P sequences, T tokens (T−1 context pairs + query), D input dimension.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np

from src.registry import registry
from src.settings import require_int, require_number


@dataclass(frozen=True)
class DynamicsTaskConfig:
    objective: ClassVar[str] = "query_mse"  # registry "objective": the original's MSE
    in_dim: int = 4  # D
    seq_len: int = 32  # T tokens per sequence: T - 1 context pairs and the query
    trainset_size: int = 5000  # P
    testset_size: int = 0  # sequences in each test set (in-context, in-weight); 0 = none
    white_cov: bool = False  # Λ = I/D instead of eigenvalues ∝ 1..D
    icl: float = 1.0  # fraction of training sequences with their own task vector
    seed: int = 0  # seed of the data sets

    def check(self) -> None:
        require_int("in_dim", self.in_dim, 1)
        require_int("seq_len", self.seq_len, 2)
        require_int("trainset_size", self.trainset_size, 1)
        require_int("testset_size", self.testset_size, 0)
        require_number("icl", self.icl, 0, high=1)


class SequenceSet(NamedTuple):
    tokens: np.ndarray  # [P, T, D+1]: [x; y], query y = 0
    targets: np.ndarray  # [P]: the query's y


def input_eigenvalues(in_dim: int, white: bool) -> np.ndarray:
    """λ_1..λ_D of Λ (trace 1): ∝ 1..D, or all 1/D."""
    raw = np.ones(in_dim) if white else np.arange(1, in_dim + 1, dtype=np.float64)
    return raw / raw.sum()


def whiten(vectors: np.ndarray) -> np.ndarray:
    """Rows w_p [n, D] linearly mapped so that (1/n) Σ_p w_p w_pᵀ = I exactly (needs n >= D)."""
    second = vectors.T @ vectors / len(vectors)
    values, basis = np.linalg.eigh(second)
    return vectors @ basis @ np.diag(values**-0.5) @ basis.T


def _sequences(
    rng: np.random.Generator, count: int, cfg: DynamicsTaskConfig, task_vectors: np.ndarray, context_noise: bool = False
) -> SequenceSet:
    """`count` sequences, task vector task_vectors[p] [count, D]; context labels N(0, 1)
    instead of w·x when `context_noise` (the in-weight test)."""
    d, t = cfg.in_dim, cfg.seq_len
    scale = np.sqrt(input_eigenvalues(d, cfg.white_cov))
    x = rng.standard_normal((count, t, d)) * scale
    x = x - x.mean(axis=0, keepdims=True)
    y = np.einsum("ptd,pd->pt", x, task_vectors)
    targets = y[:, -1].copy()
    if context_noise:
        y = rng.standard_normal((count, t))
    y[:, -1] = 0.0
    return SequenceSet(np.concatenate([x, y[..., None]], axis=-1), targets)


def make_sets(cfg: DynamicsTaskConfig) -> dict[str, SequenceSet]:
    """{"train"} plus {"test_icl", "test_iwl"} when testset_size > 0."""
    rng = np.random.default_rng(cfg.seed)
    d, p = cfg.in_dim, cfg.trainset_size
    fixed = rng.standard_normal(d)  # w*, shared by the in-weight sequences
    own = int(round(cfg.icl * p))
    random_w = rng.standard_normal((own, d))
    if own >= d:
        random_w = whiten(random_w)
    task_vectors = np.concatenate([random_w, np.tile(fixed, (p - own, 1))])
    sets = {"train": _sequences(rng, p, cfg, task_vectors)}
    if cfg.testset_size:
        n = cfg.testset_size
        sets["test_icl"] = _sequences(
            rng, n, cfg, whiten(rng.standard_normal((n, d))) if n >= d else rng.standard_normal((n, d))
        )
        sets["test_iwl"] = _sequences(rng, n, cfg, np.tile(fixed, (n, 1)), context_noise=True)
    return sets


@registry("task").register(
    "dynamics_regression",
    DynamicsTaskConfig,
    doc="Zhang et al.: a fixed set of P sequences [x; y], x ~ N(0, Λ), whitened task vectors, icl fraction",
)
def build_dynamics_regression(options: DynamicsTaskConfig) -> dict[str, SequenceSet]:
    return make_sets(options)
