"""The read side of a trained run, by capability: what an analysis may ask of a run without
naming its system or importing the system's code. A system registers, per capability it has, a
class that knows its insides (src/systems/read_sides.py); an analysis asks for the capability.

    pairs = read_side(PredictsPairs, settings)       # any run whose system predicts (x, y) pairs
    model, params, state = pairs.restore(run)         # the trained model, parameters checked
    batch = pairs.prompts(n_points)                   # its fixed eval prompts (src/tasks/pairs.py)
    ŷ = pairs.predictor(model, params, state, n_points)(batch)     # [E, n]

Capabilities (the systems that have them):
    PredictsPairs      a sequence model of (x, y) pairs that predicts every y_i from the pairs
                       before it (Garg et al.'s GPT-2 family: gpt2; lm on its pair tasks)
    PredictsQueries    a model of one query after N context pairs, on the system's fixed eval
                       tasks (von Oswald et al.'s lsa and nonlinear)
    AnswersPairPrompts predicts the last point of a prompt of (x, y) pairs, so every evaluation
                       shift applies to it (gpt2; lm on its pair tasks; lsa on the pair form of
                       its prompts)
    ScoredAgainstGD    scored against one tuned GD step on the paper's eval set, with its
                       curricula (lsa)
    ExposesAttention   saved its attention weights under attn/ (lsa with save_attention)
    ExposesHiddenStates its residual stream at the query of a pair prompt, layer by layer (gpt2;
                       lm on its pair tasks; lsa, at the query token only): what residual-stream
                       probes read (analysis.probes)
    PredictsTokens     a sequence model of tokens: next-token logits at every position (lm on its
                       token tasks)
    LearnsFunctions    predicts a query of a non-linear function (the sine regression: nonlinear)
    TracksDynamics     recorded W_KQ's singular values per epoch (Zhang et al.'s dynamics)
Shapes: E prompts, n points, d input dimensions.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np


class ReadSideError(ValueError):
    """A run whose system lacks the capability asked for; the message is one line."""


class Capability:
    """The base of every capability: one instance per validated settings tree."""

    words: str = ""  # what the capability is, for messages

    def __init__(self, settings: Any):
        self.settings = settings

    @classmethod
    def offered(cls, settings: Any) -> bool:
        """Whether a run of these settings has it (e.g. only when it saved what it needs)."""
        return True

    def restore(self, run) -> tuple:
        """The trained model and its parameters read from RunDir `run` (checked against the model;
        MissingArtifact / CorruptArtifact naming the file when unusable)."""
        raise NotImplementedError


class PredictsPairs(Capability):
    words = "predict (x, y) pairs"

    def restore(self, run) -> tuple:
        """(model, params, state): the Haiku model, its trained parameters and its state."""
        raise NotImplementedError

    def prompts(self, n_points: int | None = None, alpha: float = 1.0):
        """The fixed eval prompts (a PairPrompt: xs [E, n, d], ys [E, n], weights, w) of n_points
        points (default: the trained number), inputs scaled by alpha."""
        raise NotImplementedError

    def sampler(self, n_points: int | None = None) -> Callable:
        """sample(key, E, d, n, alpha=1.0) -> a batch: fresh prompts of the run's task."""
        raise NotImplementedError

    def predictor(self, model, params, state, n_points: int | None = None, tasks: int | None = None) -> Callable:
        """predict(prompt: a PairPrompt, xs [E, n, d], ys [E, n]) -> ŷ [E, n], in blocks of `rows` prompts."""
        raise NotImplementedError

    def rows(self, n_points: int | None = None, tasks: int | None = None, keep_attention: bool = False) -> int:
        """Prompts of n_points evaluated at once within the memory block (src/batched.py)."""
        raise NotImplementedError

    def prompt_bytes(self, tasks: int, n_points: int, n_dims: int) -> int:
        """Bytes of a batch of `tasks` prompts."""
        raise NotImplementedError

    def prompt_work(self, n_points: int | None = None) -> int:
        """Operations of one prompt's forward pass at n_points (default: the trained number), by
        src.bounds.forward_work: what analyses budget (analysis/budget.py)."""
        raise NotImplementedError

    def training_work(self) -> int:
        """Operations the run's training spent by the same estimate: every step's batch forward and
        backward (three forward passes' worth) and every log point's evaluation of the eval set."""
        raise NotImplementedError

    def points_limit(self) -> int | None:
        """The most points the model's position encoding can index, or None (no limit)."""
        raise NotImplementedError

    def trained_shape(self) -> tuple[int, int]:
        """(n, d): the points and input dimensions of the prompts it was trained on at the end."""
        raise NotImplementedError

    def pool_size(self) -> int:
        """How many task vectors it was trained on (a fixed pool; 0: a fresh one every prompt)."""
        return 0


class PredictsQueries(Capability):
    words = "predict a query after context pairs (on the paper's eval tasks)"

    def restore(self, run) -> tuple:
        """(model, params)."""
        raise NotImplementedError

    def prompts(self, alpha: float = 1.0, seed: int | None = None):
        """The fixed eval tasks (train.eval_size of them, from train.eval_seed or `seed`): a PairPrompt
        of context pairs and a query, with query_y."""
        raise NotImplementedError

    def predictor(self, model, params) -> Callable:
        """predict(tasks: a PairPrompt, its last point the query) -> ŷ [B] at the query (jitted)."""
        raise NotImplementedError


class AnswersPairPrompts(Capability):
    words = "predict the last point of a prompt of (x, y) pairs"

    def restore(self, run) -> tuple:
        """The trained model and parameters (what query_predictor takes)."""
        raise NotImplementedError

    def pair_prompts(self, alpha: float = 1.0):
        """The run's fixed eval prompts as pairs (a PairPrompt: xs [E, n, d], ys [E, n], weights, w
        [E, d], dims) at its trained length; the last point is the query."""
        raise NotImplementedError

    def query_predictor(self, restored: tuple, n_points: int, tasks: int | None = None) -> Callable:
        """predict(prompt: a PairPrompt, xs [E, n, d], ys [E, n]) -> ŷ [E] at the last point, in blocks of
        prompts."""
        raise NotImplementedError

    def task_name(self) -> str:
        """The registered task the prompts are drawn from."""
        return self.settings.task.name

    def label_scale(self) -> float:
        """s of the task's labels y = s·(x·w) where they are linear: the task options' `scale`
        (Garg et al.'s), else 1."""
        return getattr(getattr(self.settings.task, "options", None), "scale", 1.0)


class ScoredAgainstGD(PredictsQueries):
    words = "score against one tuned GD step on the paper's eval set"

    def eval_set(self, alpha: float = 1.0, gd_eta: float | None = None):
        """src.gd_paper.eval_set.EvalSet of the run's eval tasks (inputs scaled by alpha), GD's η tuned
        unless given."""
        raise NotImplementedError


class ExposesAttention(Capability):
    words = "save its attention weights (attn/)"


# where a probe reads the residual stream of a pair prompt: at the query's x token (what predicts
# the answer); at the last context pair's y token, the last position of Akyürek et al.'s prompts
# x_1, y_1 .. x_n, y_n, where their code (google-research incontext/probe_flax.py) fits its linear
# probe; or the mean over the y tokens of the context pairs from the d-th on
HIDDEN_READ_WORDS = {
    "query": "at the query's x token",
    "last_y": "at the last context pair's y token",
    "y_mean": "mean over the y tokens from the d-th pair on",
}
HIDDEN_READS = tuple(HIDDEN_READ_WORDS)


class ExposesHiddenStates(Capability):
    words = "expose its hidden states at the query of a pair prompt"
    reads: tuple[str, ...] = HIDDEN_READS  # the reads of hidden_states this system can give

    def describe(self) -> dict:
        """{task, mixer, layers}: what a probe's record says the model was (names, L)."""
        raise NotImplementedError

    def restore(self, run) -> tuple:
        """The trained model (what hidden_states takes)."""
        raise NotImplementedError

    def untrained(self) -> tuple:
        """The same model at its initial parameters (the run's seed): a probe's control."""
        raise NotImplementedError

    def fresh_prompts(self, key, prompts: int):
        """`prompts` fresh prompts of the run's task at its trained shape (a PairPrompt with w)."""
        raise NotImplementedError

    def hidden_states(self, restored: tuple, prompt, read: str = "query") -> np.ndarray:
        """[L + 1, E, D] float64: the residual stream at the query (the last point's x token) after
        the read-in and position encoding (0), then after each of the L layers (before the final norm);
        read "last_y": the same at the last context pair's y token; read "y_mean": its mean over the y
        tokens of the context pairs from the d-th on (HIDDEN_READS)."""
        raise NotImplementedError


class PredictsTokens(Capability):
    words = "predict tokens"

    def restore(self, run) -> tuple:
        """(model, params, state): the Haiku model of the sequence family, its trained parameters
        and its state; `self.settings.model` is its SequenceConfig."""
        raise NotImplementedError


class LearnsFunctions(PredictsQueries):
    words = "predict a query of a non-linear function"


class TracksDynamics(Capability):
    words = "record W_KQ's singular values per epoch"


# capability -> system name -> its read side (a subclass of the capability)
READ_SIDES: dict[type, dict[str, type]] = {}


def register_read_side(system: str):
    """Class decorator: `side` (a subclass of one or more capabilities) is `system`'s read side."""

    def register(side: type) -> type:
        capabilities = [
            c for c in side.__mro__ if c is not Capability and issubclass(c, Capability) and c.__module__ == __name__
        ]
        if not capabilities:
            raise TypeError(f"{side.__name__} is not a subclass of a capability")
        for capability in capabilities:
            READ_SIDES.setdefault(capability, {})[system] = side
        return side

    return register


def _sides(capability: type) -> dict[str, type]:
    from src.registry import load_entries

    load_entries()  # the systems' files register their read sides when imported
    return READ_SIDES.get(capability, {})


def systems_with(capability: type) -> tuple[str, ...]:
    """The registered systems that have `capability`."""
    return tuple(sorted(_sides(capability)))


def has(capability: type, settings: Any) -> bool:
    """Whether a run of `settings` has `capability` (an analysis's `applies` predicate)."""
    side = _sides(capability).get(getattr(settings, "system", None))
    return side is not None and side.offered(settings)


def read_side(capability: type, settings: Any):
    """The read side of `settings`' system for `capability`; ReadSideError (one line) if it has none."""
    sides = _sides(capability)
    system = getattr(settings, "system", None)
    if not has(capability, settings):
        raise ReadSideError(
            f"a run of system {system!r} does not {capability.words}; accepted: a run of "
            f"{' or '.join(map(repr, systems_with(capability))) or 'no registered system'}"
        )
    return sides[system](settings)
