"""Checkpoints: the loop's `Progress` (src/loop.py) as one .npz of plain arrays, tied to the
settings of its run — the wrapper that makes every system resumable.

    arrays = to_arrays(progress, settings.digest())        # what the pipeline writes
    progress = from_arrays(arrays, like, settings.digest())  # CheckpointError: one line

`like` is the shape of the trainer's state (jax.eval_shape of `init_state`): a checkpoint of
other settings, or whose arrays do not fit the model, is refused, never loaded into it.
Layout: format, step, first_loss, settings_digest (sha256 as bytes), params/0000…,
opt_state/0000… (tree leaves in order), per_step/<name>, at_log/<name>.
"""

from __future__ import annotations

import math

import jax
import numpy as np

from src.loop import Progress, TrainState
from src.params import first_non_finite

FORMAT = 1
PARTS = ("params", "opt_state")  # the training state's parts, stored as <part>/0000...


class CheckpointError(ValueError):
    """A checkpoint that cannot continue this run; the message is one line."""


def to_arrays(progress: Progress, digest: str) -> dict[str, np.ndarray]:
    arrays = {
        "format": np.asarray(FORMAT),
        "step": np.asarray(progress.step),
        "first_loss": np.asarray(math.nan if progress.first_loss is None else progress.first_loss),
        "settings_digest": np.frombuffer(digest.encode(), np.uint8),
    }
    for part in PARTS:
        leaves = jax.tree_util.tree_leaves(getattr(progress.state, part))
        arrays.update({f"{part}/{i:04d}": np.asarray(leaf) for i, leaf in enumerate(leaves)})
    arrays.update({f"per_step/{k}": np.asarray(v) for k, v in progress.per_step.items()})
    arrays.update({f"at_log/{k}": np.asarray(v) for k, v in progress.at_log.items()})
    return arrays


def state_arrays(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays of a checkpoint that hold the training state (parameters, optimizer state)."""
    return {k: a for k, a in arrays.items() if k.split("/", 1)[0] in PARTS}


def _tree(part: str, like, arrays: dict) -> object:
    structs, treedef = jax.tree_util.tree_flatten(like)
    stored = sorted(k for k in arrays if k.startswith(f"{part}/"))
    if len(stored) != len(structs):
        raise CheckpointError(f"its {part} has {len(stored)} arrays; this run's has {len(structs)}")
    leaves = []
    for i, struct in enumerate(structs):
        leaf = arrays[f"{part}/{i:04d}"] if f"{part}/{i:04d}" in arrays else None
        if leaf is None or tuple(leaf.shape) != tuple(struct.shape) or leaf.dtype != struct.dtype:
            got = "missing" if leaf is None else f"{leaf.dtype}{list(leaf.shape)}"
            raise CheckpointError(f"its {part} array {i} is {got}; this run's is {struct.dtype}{list(struct.shape)}")
        leaves.append(jax.numpy.asarray(leaf))
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _check_of_this_run(arrays: dict[str, np.ndarray], keys: tuple[str, ...], digest: str) -> None:
    """CheckpointError (one line) unless the file has `keys`, this code's format and a settings
    digest equal to `digest` (the run's)."""
    for key in keys:
        if key not in arrays:
            raise CheckpointError(f"it has no {key!r} array; it was not written by this code")
    if int(arrays["format"]) != FORMAT:
        raise CheckpointError(f"its format is {int(arrays['format'])}; accepted: {FORMAT}")
    stored = bytes(np.asarray(arrays["settings_digest"], np.uint8)).decode(errors="replace")
    if stored != digest:
        raise CheckpointError(
            "it was written by a run of other settings (its settings digest "
            f"{stored[:12]}… differs from this run's {digest[:12]}…)"
        )


def from_arrays(arrays: dict[str, np.ndarray], like: TrainState, digest: str, total: int) -> Progress:
    """The Progress of a checkpoint of this run (`digest` of its settings, `total` steps)."""
    _check_of_this_run(arrays, ("format", "step", "first_loss", "settings_digest"), digest)
    step = int(arrays["step"])
    if not 0 < step <= total:
        raise CheckpointError(f"its step {step} is outside this run's 1..{total}")
    bad = first_non_finite(state_arrays(arrays))
    if bad is not None:
        raise CheckpointError(
            f"its {bad.split('/')[0]} array {bad.split('/')[1]} is not finite (a run "
            "keeps only finite states: the file was altered or damaged)"
        )
    state = TrainState(_tree("params", like.params, arrays), _tree("opt_state", like.opt_state, arrays))
    per_step = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith("per_step/")}
    at_log = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith("at_log/")}
    if any(len(v) != step for v in per_step.values()):
        raise CheckpointError(f"its per-step records do not hold {step} steps")
    first = float(arrays["first_loss"])
    return Progress(step, state, per_step, at_log, None if math.isnan(first) else first)


def checkpoint_params(arrays: dict[str, np.ndarray], like, digest: str) -> tuple[int, object]:
    """(step, parameters) of a checkpoint of this run (`digest` of its settings), its optimizer
    state left unread: what a run stopped before its end had trained, for evaluating it. `like`
    is the parameters' tree (shapes and dtypes), e.g. the model's init. CheckpointError: one line."""
    _check_of_this_run(arrays, ("format", "step", "settings_digest"), digest)
    params = {k: a for k, a in arrays.items() if k.startswith("params/")}
    bad = first_non_finite(params)
    if bad is not None:
        raise CheckpointError(f"its params array {bad.split('/')[1]} is not finite")
    return int(arrays["step"]), _tree("params", like, arrays)
