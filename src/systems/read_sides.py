"""Every system's read side (src/read_side.py): how an analysis gets a trained model and the
prompts it is evaluated on from a run, by capability. The only code outside a system's own file
that knows its insides; analyses import none of it.

    gpt2       PredictsPairs                     Garg et al.'s GPT-2 family (any mixer, any position)
    lsa        ScoredAgainstGD (PredictsQueries)  von Oswald et al.'s attention-only models
               ExposesAttention                   ... when it saved its attention (save_attention)
    nonlinear  LearnsFunctions (PredictsQueries)  the MLP + LSA model on the sine-regression tasks
    dynamics   TracksDynamics                     Zhang et al.'s linear attention on fixed sets
"""
from __future__ import annotations

import dataclasses

import jax

from src.eval_set import make_eval_set
from src.models.attention_only import build_model
from src.models.layouts import make_tokens
from src.models.sequence import canonical_param_name
from src.read_side import (ExposesAttention, LearnsFunctions, PredictsPairs, ScoredAgainstGD, TracksDynamics,
                           register_read_side)
from src.registry import registry
from src.rundir.names import PARAMS
from src.systems import gpt2, nonlinear


@register_read_side("gpt2")
class GPT2Pairs(PredictsPairs):
    def restore(self, run) -> tuple:
        model = gpt2.make_model(self.settings)
        params, state = gpt2.init_model(self.settings, model)
        loaded = run.load_params(like=params, rename=canonical_param_name)   # older names read too
        return model, loaded, state

    def prompts(self, n_points=None, alpha=1.0):
        return gpt2.eval_batch(self.settings, n_points, alpha)

    def sampler(self, n_points=None):
        return gpt2.sampler(self.settings, n_points)

    def predictor(self, model, params, state, n_points=None, tasks=None):
        return gpt2.predictor(self.settings, model, params, state, n_points, tasks)

    def rows(self, n_points=None, tasks=None, keep_attention=False) -> int:
        return gpt2.eval_rows(self.settings, n_points, tasks, keep_attention)

    def prompt_bytes(self, tasks, n_points, n_dims) -> int:
        return gpt2.prompt_bytes(tasks, n_points, n_dims)

    def points_limit(self) -> int | None:
        tokens = self.settings.model.encoding().max_tokens()
        return None if tokens is None else tokens // 2


@register_read_side("lsa")
class LSAQueries(ScoredAgainstGD):
    def restore(self, run) -> tuple:
        run.require(PARAMS)
        model = build_model(self.settings.task, self.settings.model)
        like = jax.eval_shape(model.init, jax.random.PRNGKey(0))   # shapes only: nothing computed
        return model, run.load_params(like=like)

    def prompts(self, alpha=1.0, seed=None):
        return make_eval_set(with_eval_seed(self.settings, seed), alpha).tasks

    def predictor(self, model, params):
        return jax.jit(lambda tasks: model.apply(params, make_tokens(tasks, model.config)).prediction)

    def eval_set(self, alpha=1.0, gd_eta=None):
        return make_eval_set(self.settings, alpha, gd_eta)


@register_read_side("lsa")
class LSAAttention(ExposesAttention):
    @classmethod
    def offered(cls, settings) -> bool:
        return bool(settings.save_attention)


@register_read_side("dynamics")
class DynamicsRecord(TracksDynamics):
    """Its files (dynamics.npz, metrics) are the record; nothing to restore."""


@register_read_side("nonlinear")
class NonlinearQueries(LearnsFunctions):
    def restore(self, run) -> tuple:
        run.require(PARAMS)
        model = nonlinear.build_feature_model(self.settings)
        task = self.settings.task
        sample = registry("task").get(task.name).build(task.options)
        one = jax.eval_shape(lambda key: sample(key, 1), jax.random.key(0))     # shapes only
        return model, run.load_params(like=jax.eval_shape(model.init, jax.random.key(0), one))

    def prompts(self, alpha=1.0, seed=None):
        return nonlinear.make_eval_tasks(with_eval_seed(self.settings, seed), alpha)

    def predictor(self, model, params):
        return jax.jit(lambda tasks: model.apply(params, tasks))


def with_eval_seed(settings, seed: int | None):
    """`settings` with train.eval_seed = seed (unchanged for None): other fixed eval tasks."""
    if seed is None:
        return settings
    return dataclasses.replace(settings, train=dataclasses.replace(settings.train, eval_seed=seed))
