"""The read side of a trained run, by capability: what an analysis may ask of a run without
naming its system or importing the system's code. A system registers, per capability it has, a
class that knows its insides (src/systems/<name>.py); an analysis asks for the capability.

    pairs = read_side(PredictsPairs, settings)       # any run whose system predicts (x, y) pairs
    model, params, state = pairs.restore(run)         # the trained model, parameters checked
    batch = pairs.prompts(n_points)                   # its fixed eval prompts: xs [E, n, d], ys [E, n]
    ŷ = pairs.predictor(model, params, state, n_points)(batch.xs, batch.ys)     # [E, n]

Capabilities:
    PredictsPairs    a sequence model of (x, y) pairs that predicts every y_i from the pairs
                     before it (Garg et al.'s GPT-2 family: gpt2)
    PredictsQueries  a model of one query after N context pairs, scored on the system's fixed
                     eval tasks (von Oswald et al.'s lsa and nonlinear)
Shapes: E prompts, n points, d input dimensions.
"""
from __future__ import annotations

from typing import Any, Callable


class ReadSideError(ValueError):
    """A run whose system lacks the capability asked for; the message is one line."""


class Capability:
    """The base of every capability: one instance per validated settings tree."""
    words: str = ""        # what the capability is, for messages

    def __init__(self, settings: Any):
        self.settings = settings

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
        """The fixed eval prompts (a batch with xs [E, n, d], ys [E, n], weights, w) of n_points
        points (default: the trained number), inputs scaled by alpha."""
        raise NotImplementedError

    def sampler(self, n_points: int | None = None) -> Callable:
        """sample(key, E, d, n, alpha=1.0) -> a batch: fresh prompts of the run's task."""
        raise NotImplementedError

    def predictor(self, model, params, state, n_points: int | None = None,
                  tasks: int | None = None) -> Callable:
        """predict(xs [E, n, d], ys [E, n]) -> ŷ [E, n], in blocks of `rows` prompts."""
        raise NotImplementedError

    def rows(self, n_points: int | None = None, tasks: int | None = None, keep_attention: bool = False) -> int:
        """Prompts of n_points evaluated at once within the memory block (src/batched.py)."""
        raise NotImplementedError

    def prompt_bytes(self, tasks: int, n_points: int, n_dims: int) -> int:
        """Bytes of a batch of `tasks` prompts."""
        raise NotImplementedError

    def points_limit(self) -> int | None:
        """The most points the model's position encoding can index, or None (no limit)."""
        raise NotImplementedError


class PredictsQueries(Capability):
    words = "predict a query after context pairs (on the paper's eval tasks)"

    def restore(self, run) -> tuple:
        """(model, params)."""
        raise NotImplementedError

    def prompts(self, alpha: float = 1.0, seed: int | None = None):
        """The fixed eval tasks (train.eval_size of them, from train.eval_seed or `seed`): context
        pairs and a query, with query_y."""
        raise NotImplementedError

    def predictor(self, model, params) -> Callable:
        """predict(tasks) -> ŷ [B] at the query (jitted)."""
        raise NotImplementedError


# capability -> system name -> its read side (a subclass of the capability)
READ_SIDES: dict[type, dict[str, type]] = {}


def register_read_side(system: str):
    """Class decorator: `side` (a subclass of one or more capabilities) is `system`'s read side."""
    def register(side: type) -> type:
        capabilities = [c for c in side.__mro__[1:] if c is not Capability and issubclass(c, Capability)
                        and Capability in c.__bases__]
        if not capabilities:
            raise TypeError(f"{side.__name__} is not a subclass of a capability")
        for capability in capabilities:
            READ_SIDES.setdefault(capability, {})[system] = side
        return side
    return register


def _sides(capability: type) -> dict[str, type]:
    from src.registry import load_entries
    load_entries()              # the systems' files register their read sides when imported
    return READ_SIDES.get(capability, {})


def systems_with(capability: type) -> tuple[str, ...]:
    """The registered systems that have `capability`."""
    return tuple(sorted(_sides(capability)))


def has(capability: type, settings: Any) -> bool:
    """Whether `settings`' system has `capability` (an analysis's `applies` predicate)."""
    return getattr(settings, "system", None) in _sides(capability)


def read_side(capability: type, settings: Any):
    """The read side of `settings`' system for `capability`; ReadSideError (one line) if it has none."""
    sides = _sides(capability)
    system = getattr(settings, "system", None)
    if system not in sides:
        raise ReadSideError(f"a run of system {system!r} does not {capability.words}; accepted: a run of "
                            f"{' or '.join(map(repr, systems_with(capability))) or 'no registered system'}")
    return sides[system](settings)
