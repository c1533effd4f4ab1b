"""The in-context estimators of a Markov chain's next token (src/tasks/markov.py), registered as
baselines (registry "baseline") of the tasks the `markov` objective scores: each maps a batch's
tokens [B, T] to next-token distributions [B, T, k]; scored by the cross-entropy against the true
distribution P[x_t] (src.tasks.markov.cross_entropy).

  markov_uniform   1/k
  markov_unigram   add-one counts of the tokens so far
  markov_bigram    add-one counts of the transitions out of the current token (the Bayes
                   posterior mean under Dirichlet(1) rows)
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from src.registry import registry
from src.tasks.markov import ESTIMATORS, cross_entropy


@dataclass(frozen=True)
class NextTokenBaseline:
    """No options: an estimator of the next token from the tokens so far."""


def _markov_task(task_name: str) -> bool:
    from src.tasks.objectives import objective_name

    return task_name in registry("task") and objective_name(task_name) == "markov"


def estimator_cross_entropy(name: str, batch) -> np.ndarray:
    """[T] the estimator's cross-entropy against P[x_t] at each position, mean over the batch."""
    probs = ESTIMATORS[name](batch.inputs, batch.next_probs.shape[-1])
    return np.asarray(jnp.mean(cross_entropy(batch.next_probs, jnp.log(probs)), axis=0))


for _name, _doc in (
    ("uniform", "1/k for every state"),
    ("unigram", "add-one counts of the tokens so far"),
    ("bigram", "add-one counts of the transitions out of the current token (Bayes at Dirichlet(1))"),
):
    registry("baseline").register(
        f"markov_{_name}", NextTokenBaseline, applies=_markov_task, doc=f"Markov chains: {_doc}"
    )(lambda options, name=_name: lambda tokens, k: ESTIMATORS[name](tokens, k))
