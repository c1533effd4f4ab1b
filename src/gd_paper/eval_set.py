"""The fixed evaluation of the paper's system (von Oswald et al.): eval tasks drawn from a seed
that the training seed does not change (so seeds are scored on the same tasks), the eval
curriculum applied once, one GD step tuned on a second held-out set, and the scores of a model
against it (src/gd_paper/metrics.py) plus every probe that applies.

Shapes: E eval tasks, N pairs, d input dim.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, NamedTuple

import jax
import numpy as np

from src.gd_paper.config import CurriculumConfig, TaskConfig
from src.gd_paper.curricula import CurriculumOutput, apply_curriculum
from src.gd_paper.metrics import Reference, make_scorer
from src.registry import registry
from src.tasks.paper_form import paper_form_sampler
from src.tasks.pairs import PairPrompt

# The reference predictor every run of the paper's system is scored against (registry "baseline").
REFERENCE = "gd_one_step"


def reference_baseline():
    return registry("baseline").get(REFERENCE).build(None)


def task_sampler(task: TaskConfig):
    """(key, batch_size, alpha=1) -> PairPrompt, from the task's registry entry (a pair task in the
    paper's form: src/tasks/paper_form.py)."""
    return paper_form_sampler(task)


class EvalSet(NamedTuple):
    """The fixed evaluation tasks (drawn from `eval_seed`, never from `seed`) and GD on them."""

    clean_tasks: PairPrompt  # before the eval curriculum
    tasks: PairPrompt  # after noise, ordering and placement
    ordering_idx: np.ndarray  # [E, N] int32
    noise_mask: np.ndarray  # [E, N] bool (in the new order)
    gd_eta: float  # tuned on a second held-out set of the same distribution
    reference: Reference  # GD's predictions and sensitivities on `tasks`


@partial(jax.jit, static_argnames=("size", "task", "curriculum"))
def draw_tasks(
    key: jax.Array, size: int, task: TaskConfig, curriculum: CurriculumConfig, alpha: float = 1.0
) -> tuple[PairPrompt, CurriculumOutput]:
    """`size` clean tasks from `key` and the same tasks after `curriculum`."""
    key_tasks, key_curriculum = jax.random.split(key)
    clean = task_sampler(task)(key_tasks, size, alpha)
    return clean, apply_curriculum(key_curriculum, clean, curriculum, task, alpha)


def make_eval_set(settings, alpha: float = 1.0, gd_eta: float | None = None) -> EvalSet:
    """Draw the eval set, apply the eval curriculum once, and tune GD's η (unless given)."""
    tr = settings.train
    clean, transformed = draw_tasks(
        jax.random.key(tr.eval_seed), tr.eval_size, settings.task, settings.eval_curriculum, alpha
    )
    if gd_eta is None:
        gd_eta = tune_gd_eta(settings)
    return EvalSet(
        clean,
        transformed.tasks,
        np.asarray(transformed.ordering_idx),
        np.asarray(transformed.noise_mask),
        gd_eta,
        reference_baseline().reference(transformed.tasks, gd_eta),
    )


def tune_gd_eta(settings) -> float:
    """η of one GD step, tuned on held-out tasks from the eval distribution at α = 1."""
    tr = settings.train
    _, held_out = draw_tasks(jax.random.key(tr.eval_seed + 1), tr.eval_size, settings.task, settings.eval_curriculum)
    eta, _ = reference_baseline().tune_eta(held_out.tasks)
    return eta


def make_evaluator(model, settings) -> Callable[[Any, EvalSet], dict[str, float]]:
    """params, eval_set -> {eval_loss, gd_loss, align_cos, l2_pred_diff, model_diff} plus the
    scores of every registered probe that applies to `settings` (e.g. copy_*)."""
    scores = make_scorer(model)
    probes = [entry.build(None, model) for entry in registry("probe").applicable(settings)]

    def evaluate(params, eval_set: EvalSet) -> dict[str, float]:
        out = scores(params, eval_set.tasks, eval_set.reference)
        for probe in probes:
            out.update(probe(params, eval_set.tasks))
        return out

    return evaluate
