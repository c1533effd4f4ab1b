"""Every system's read side (src/read_side.py): how an analysis gets a trained model and the
prompts it is evaluated on from a run, by capability. The only code outside a system's own file
that knows its insides; analyses import none of it.

    gpt2       PredictsPairs, ExposesHiddenStates Garg et al.'s GPT-2 family (any mixer, any position)
    lm         PredictsPairs, AnswersPairPrompts  the ICL benchmark's models on its pair tasks
               ExposesHiddenStates
    lsa        ScoredAgainstGD (PredictsQueries)  von Oswald et al.'s attention-only models
               ExposesHiddenStates                ... at the query token (its last layer updates no other)
               ExposesAttention                   ... when it saved its attention (save_attention)
    nonlinear  LearnsFunctions (PredictsQueries)  the MLP + LSA model on the sine-regression tasks
    dynamics   TracksDynamics                     Zhang et al.'s linear attention on fixed sets
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from src.batched import block_rows, in_blocks
from src.bounds import forward_bytes, forward_work
from src.gd_paper.eval_set import draw_tasks, make_eval_set
from src.gd_paper.models.attention_only import build_model
from src.gd_paper.models.layouts import make_tokens
from src.models.residual import residual_stream
from src.models.sequence import canonical_param_name
from src.read_side import (
    AnswersPairPrompts,
    ExposesAttention,
    ExposesHiddenStates,
    LearnsFunctions,
    PredictsPairs,
    PredictsTokens,
    ScoredAgainstGD,
    TracksDynamics,
    register_read_side,
)
from src.registry import registry
from src.rundir.names import PARAMS
from src.tasks.objectives import objective_of
from src.systems import gpt2, gpt2_prompts, lm, lm_batches, nonlinear
from src.systems.lsa import init_and_train_keys, token_width


class SequencePairs(PredictsPairs, AnswersPairPrompts, ExposesHiddenStates):
    """What the one sequence family's pair models share (gpt2; lm on its pair tasks)."""

    def fresh_prompts(self, key, prompts: int):
        points, dims = self.trained_shape()
        return jax.jit(lambda k: self.sampler(points)(k, prompts, dims, points))(key)

    def describe(self) -> dict:
        m = self.settings.model
        return {"task": self.settings.task.name, "mixer": m.mixer_label(), "layers": m.n_layer}

    def hidden_states(self, restored, prompt, read: str = "query") -> np.ndarray:
        """The residual stream at the last point's x token (2(n − 1)), (read "last_y") at the last
        context pair's y token (2(n − 1) − 1), or (read "y_mean") its mean over the y tokens (2i + 1)
        of the context pairs i = d − 1 .. n − 2 (0-based; every pair when fewer than d precede the
        query), in blocks of prompts."""
        _, params, state = restored
        n, d = prompt.xs.shape[1], prompt.xs.shape[2]
        model = self.settings.model
        if read in ("query", "last_y"):
            token = 2 * (n - 1) - (read == "last_y")

            def states(xs, ys):
                return residual_stream(model, params, state, xs, ys, at=token)
        else:
            first = d - 1 if n - 1 >= d else 0
            y_tokens = 2 * np.arange(first, n - 1) + 1

            def states(xs, ys):
                return residual_stream(model, params, state, xs, ys)[:, :, y_tokens].mean(axis=2)

        per_prompt = in_blocks(jax.jit(lambda p: states(p.xs, p.ys).swapaxes(0, 1)), self.rows(n, prompt.xs.shape[0]))(
            prompt
        )
        return np.asarray(per_prompt, np.float64).swapaxes(0, 1)

    def prompt_bytes(self, tasks, n_points, n_dims) -> int:
        return gpt2_prompts.prompt_bytes(tasks, n_points, n_dims)

    def prompt_work(self, n_points=None) -> int:
        m = self.settings.model
        return forward_work(
            tokens=2 * (n_points or self.trained_shape()[0]), width=m.width, layers=m.n_layer, heads=m.n_head
        )

    def training_work(self) -> int:
        tr = self.settings.train
        return self.prompt_work() * (3 * tr.steps * tr.batch_size + (tr.steps // tr.log_every + 1) * tr.eval_size)

    def points_limit(self) -> int | None:
        tokens = self.settings.model.encoding().max_tokens()
        return None if tokens is None else tokens // 2

    def pair_prompts(self, alpha=1.0):
        return self.prompts(None, alpha)


@register_read_side("gpt2")
class GPT2Pairs(SequencePairs):
    def untrained(self) -> tuple:
        model = gpt2.make_model(self.settings)
        return (model, *gpt2.init_model(self.settings, model))

    def restore(self, run) -> tuple:
        model, params, state = self.untrained()
        loaded = run.load_params(like=params, rename=canonical_param_name)  # older names read too
        return model, loaded, state

    def prompts(self, n_points=None, alpha=1.0):
        return gpt2_prompts.eval_batch(self.settings, n_points, alpha)

    def sampler(self, n_points=None):
        return gpt2_prompts.sampler(self.settings, n_points)

    def predictor(self, model, params, state, n_points=None, tasks=None):
        return gpt2_prompts.predictor(self.settings, model, params, state, n_points, tasks)

    def rows(self, n_points=None, tasks=None, keep_attention=False) -> int:
        return gpt2_prompts.eval_rows(self.settings, n_points, tasks, keep_attention)

    def trained_shape(self) -> tuple[int, int]:
        c = self.settings.curriculum
        return c.points.end, c.dims.end

    def pool_size(self) -> int:
        return self.settings.train.num_tasks

    def query_predictor(self, restored, n_points, tasks=None):
        predict = self.predictor(*restored, n_points, tasks)
        return lambda prompt: predict(prompt)[:, -1]


def untrained_lm(settings) -> tuple:
    """(model, params, state) of an lm run's settings at its initial parameters."""
    model = lm.make_model(settings)
    return (model, *lm.init_model(settings, model))


def restore_lm(settings, run) -> tuple:
    """(model, params, state) of an lm run, its parameters read under any version's names."""
    model, params, state = untrained_lm(settings)
    return model, run.load_params(like=params, rename=canonical_param_name), state


@register_read_side("lm")
class LMPairs(SequencePairs):
    """An lm run on a pair task (regression or boolean; not the token tasks): the ICL benchmark's
    models predict every y_i from the pairs before it, as the GPT-2 family does."""

    @classmethod
    def offered(cls, settings) -> bool:
        return objective_of(settings.task.name).inputs == "pairs"

    def restore(self, run) -> tuple:
        return restore_lm(self.settings, run)

    def untrained(self) -> tuple:
        return untrained_lm(self.settings)

    def trained_shape(self) -> tuple[int, int]:
        return self.settings.pairs.n_points, self.settings.pairs.n_dims

    def sampler(self, n_points=None):
        return lm_batches.pair_sampler(self.settings, n_points)

    def prompts(self, n_points=None, alpha=1.0):
        """The fixed eval prompts; at the trained length and alpha = 1 the run's own eval batch
        (LMTrainer.evaluation: the same draw of the same key)."""
        tr, (trained, dims) = self.settings.train, self.trained_shape()
        points = n_points or trained
        sample = self.sampler(points)
        return jax.jit(lambda key: sample(key, tr.eval_size, dims, points, alpha))(jax.random.key(tr.eval_seed))

    def rows(self, n_points=None, tasks=None, keep_attention=False) -> int:
        m = self.settings.model
        return block_rows(
            forward_bytes(
                tokens=2 * (n_points or self.trained_shape()[0]),
                width=m.width,
                layers=m.n_layer,
                heads=m.n_head,
                keep_attention=keep_attention,
            ),
            tasks or self.settings.train.eval_size,
        )

    def predictor(self, model, params, state, n_points=None, tasks=None):
        apply = jax.jit(model.apply)
        return in_blocks(lambda prompt: apply(params, state, prompt.xs, prompt.ys), self.rows(n_points, tasks))

    def query_predictor(self, restored, n_points, tasks=None):
        model, params, state = restored
        at_query = jax.jit(lambda xs, ys: model.apply(params, state, xs, ys)[:, -1])
        return in_blocks(lambda prompt: at_query(prompt.xs, prompt.ys), self.rows(n_points, tasks))


@register_read_side("lm")
class LMTokens(PredictsTokens):
    """An lm run on a token task (MQAR, the Markov chains, MAD's tasks): logits at every position."""

    @classmethod
    def offered(cls, settings) -> bool:
        return objective_of(settings.task.name).inputs == "tokens"

    def restore(self, run) -> tuple:
        return restore_lm(self.settings, run)


def lsa_rows(settings, n_points: int, tasks: int) -> int:
    """Prompts of n_points pairs the paper's model evaluates at once within the memory bound."""
    m = settings.model
    return block_rows(
        forward_bytes(tokens=2 * n_points, width=token_width(settings), layers=m.num_layers, heads=m.num_heads),
        tasks,
    )


@register_read_side("lsa")
class LSAQueries(ScoredAgainstGD, AnswersPairPrompts):
    def restore(self, run) -> tuple:
        run.require(PARAMS)
        model = build_model(self.settings.task, self.settings.model)
        like = jax.eval_shape(model.init, jax.random.PRNGKey(0))  # shapes only: nothing computed
        return model, run.load_params(like=like)

    def prompts(self, alpha=1.0, seed=None):
        return make_eval_set(with_eval_seed(self.settings, seed), alpha).tasks

    def predictor(self, model, params):
        return jax.jit(lambda tasks: model.apply(params, make_tokens(tasks, model.config)).prediction)

    def eval_set(self, alpha=1.0, gd_eta=None):
        return make_eval_set(self.settings, alpha, gd_eta)

    def pair_prompts(self, alpha=1.0):
        tr = self.settings.train
        clean, _ = draw_tasks(
            jax.random.key(tr.eval_seed), tr.eval_size, self.settings.task, self.settings.eval_curriculum, alpha
        )  # the eval set's clean tasks
        return clean

    def query_predictor(self, restored, n_points, tasks=None):
        """The paper's model reads the context and the query of any prompt (its width is d + 1 per
        token, whatever the number of pairs)."""
        model, params = restored

        def at_query(prompt):
            return model.apply(params, make_tokens(prompt, model.config)).prediction

        return in_blocks(jax.jit(at_query), lsa_rows(self.settings, n_points, tasks or self.settings.train.eval_size))


@register_read_side("lsa")
class LSAHiddenStates(ExposesHiddenStates):
    """The query token's stream (the last token in both layouts: [x_q, 0] concatenated, x_q
    interleaved): the token itself (0), then after each layer. The last layer updates the query
    alone, so no mean over context tokens is read."""

    reads = ("query",)

    def describe(self) -> dict:
        m = self.settings.model
        return {"task": self.settings.task.name, "mixer": f"{m.name} ({', '.join(m.mixers)})", "layers": m.num_layers}

    def restore(self, run) -> tuple:
        return LSAQueries(self.settings).restore(run)

    def untrained(self) -> tuple:
        model = build_model(self.settings.task, self.settings.model)
        key_init, _ = init_and_train_keys(self.settings.train.seed)
        return model, model.init(key_init)

    def fresh_prompts(self, key, prompts: int):
        """Drawn as training draws them: the task, then the train curriculum."""
        _, transformed = draw_tasks(key, prompts, self.settings.task, self.settings.train_curriculum)
        return transformed.tasks

    def pool_size(self) -> int:
        return self.settings.train.num_tasks

    def hidden_states(self, restored, prompt, read: str = "query") -> np.ndarray:
        if read not in self.reads:
            raise ValueError(f"read {read!r}: accepted {', '.join(self.reads)}")
        model, params = restored

        def states(tasks):
            tokens = make_tokens(tasks, model.config)
            out = model.apply(params, tokens, return_layer_outputs=True)
            return jax.numpy.stack([tokens[:, -1]] + [h[:, -1] for h in out.layer_outputs], axis=1)

        rows = lsa_rows(self.settings, int(prompt.xs.shape[1]), int(prompt.xs.shape[0]))
        return np.asarray(in_blocks(jax.jit(states), rows)(prompt), np.float64).swapaxes(0, 1)


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
        one = jax.eval_shape(lambda key: sample(key, 1), jax.random.key(0))  # shapes only
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
