"""The settings checks of system `dynamics` (src/systems/dynamics.py): DynamicsSettings.check, the
ranges and combinations of the model, the task and the training, and the memory estimate a run is
held to (src/bounds.py), in bytes of 8-byte floats: the sequences [n, in_dim + 1, seq_len] (train
and test), the moments ((in_dim + 1)⁴ floats) and, with softmax, about 6 arrays of one chunk's
scores (src/models/dynamics_softmax.py).
"""

from __future__ import annotations

from src.bounds import check_memory, check_sizes
from src.models.dynamics import INIT_CONVENTIONS
from src.models.dynamics_softmax import chunk_size
from src.settings import SettingsError, require, require_int, require_number, require_one_of

OPTIMIZERS = {"gd": "sgd", "sgd": "sgd", "adam": "adam"}  # ours -> the optimizer factory's


def check_dynamics_settings(settings) -> None:
    """DynamicsSettings.check: a SettingsError for the first rule that fails, in this order."""
    _check_ranges(settings)
    _check_batch_size(settings)
    _check_combinations(settings)
    _check_sizes_and_memory(settings)


def _heads(settings) -> int:
    return getattr(settings.model.options, "heads", 1)


def _check_ranges(settings) -> None:
    """Each field's own range or choices."""
    t, tr = settings.task, settings.train
    for path, value, low in (
        ("model.options.heads", _heads(settings), 1),
        ("train.epochs", tr.epochs, 1),
        ("train.batch_size", tr.batch_size, 0),
    ):
        require_int(path, value, low)
    require_int("model.options.rank", getattr(settings.model.options, "rank", 1), 1, t.in_dim)
    require_number("train.init", tr.init, 0, open_low=True)
    require_one_of("train.optimizer", tr.optimizer, OPTIMIZERS)
    require_one_of("train.init_convention", tr.init_convention, INIT_CONVENTIONS)


def _check_batch_size(settings) -> None:
    """Full batch for gd and adam, a batch of at most the training set for sgd."""
    t, tr = settings.task, settings.train
    require(
        (tr.optimizer != "sgd") == (tr.batch_size == 0),
        "train.batch_size",
        tr.batch_size,
        f"0 (full batch) for optimizer gd and adam, 1..trainset_size for sgd (optimizer is {tr.optimizer!r})",
    )
    require(
        tr.batch_size <= t.trainset_size,
        "train.batch_size",
        tr.batch_size,
        f"at most task.trainset_size={t.trainset_size}",
    )


def _check_combinations(settings) -> None:
    """vary_len, track_value and softmax with the optimizer, normalize and the model."""
    tr = settings.train
    if tr.vary_len:
        require(
            tr.optimizer != "sgd" and not tr.normalize and settings.model.name != "cubic_mlp",
            "train.vary_len",
            True,
            "false with optimizer sgd, normalize or the cubic_mlp (the original: attention, full "
            "batch; it divides by each prefix's length itself)",
        )
    require(
        not tr.track_value or settings.model.name != "cubic_mlp",
        "train.track_value",
        tr.track_value,
        "false for cubic_mlp (it has no value; the original's --track_value fails there too)",
    )
    if tr.softmax:
        require(
            settings.model.name != "cubic_mlp",
            "train.softmax",
            True,
            "false for cubic_mlp (it has no "
            "attention scores to take a softmax of; the original's MLP ignores --softmax)",
        )
        require(
            not tr.normalize,
            "train.softmax",
            True,
            "false with normalize (the 1/N of X Xᵀ, a linear "
            "model's moment; softmax weights already sum to 1 over the keys)",
        )


def _check_sizes_and_memory(settings) -> None:
    """The shared integer ranges and a memory estimate (src/bounds.py)."""
    t, tr = settings.task, settings.train
    try:
        check_sizes(
            ("d", "task.in_dim", t.in_dim),
            ("points", "task.seq_len", t.seq_len),
            ("eval_size", "task.trainset_size", t.trainset_size),
            ("heads", "model.options.heads", _heads(settings)),
            ("steps", "train.epochs", tr.epochs),
            ("seed", "task.seed", t.seed),
        )
        if t.testset_size:
            check_sizes(("eval_size", "task.testset_size", t.testset_size))
        check_memory(_memory_bytes(settings), "this run")
    except ValueError as err:
        raise SettingsError(str(err)) from None


def _memory_bytes(settings) -> int:
    """The sequences, held as [n, in_dim + 1, seq_len] floats (train and test), plus moments; with
    softmax, about 6 arrays of one chunk's scores (src/models/dynamics_softmax.py)."""
    t, tr, heads = settings.task, settings.train, _heads(settings)
    scores = (
        6
        * 8
        * heads
        * t.seq_len
        * (t.seq_len if tr.vary_len else 1)
        * min(t.trainset_size, chunk_size(heads, t.seq_len, tr.vary_len))
        if tr.softmax
        else 0
    )
    return 8 * (t.trainset_size + t.testset_size) * (t.in_dim + 1) * t.seq_len + 8 * (t.in_dim + 1) ** 4 + scores
