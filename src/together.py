"""Seeds trained together: runs of one system whose settings differ only in `train.seed`, trained
as one compiled program (the system's pure chunk under `jax.vmap` over the seeds), each written
into its own run directory as training it alone would write it.

    results = train_together(trainers)        # one LoopResult per seed, or None if one diverged

A system offers this through `SystemTrainer.seed_parts()`: the paper's own (lsa), its non-linear
regression and the gpt2 system (the mechanisms and length studies); every sweep and study asks for
it with `--seeds-together` (an option of the local executor). On a GPU a group of small runs costs
little more than one of them (one H200, mechanisms cell: 0.51 ms a step for one seed, 0.78 for 4
together, 1.73 for 16; docs/workbench.md); on a CPU it gains nothing, where one process per core is
already the fastest.

Equality: the batched program does not order its sums as the single one does, so the seeds agree
with training alone to float32 rounding, not bit for bit (tests/test_together.py: every file of
the run directories, floats within 1e-6 after 20-30 steps); over a long training the difference
grows as with any change in the order of sums. Divergence: when any seed's training loss stops
being finite or explodes (the loop's rule, each seed against its own first loss), the group stops
and `train_together` returns None; the caller then trains each seed alone, which is what the seeds
would have done by themselves.

Glossary: S seeds, n steps of a chunk, K log points.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from src import interrupts
from src.loop import Chunk, LoopResult, Progress, Trainer, TrainState, first_bad_step_of_runs, train


def _stack(trees):
    return jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *trees)


def _take(tree, i: int):
    return jax.tree_util.tree_map(lambda leaf: leaf[i], tree)


def settings_without_seed(settings) -> dict:
    mapping = settings.to_dict()
    mapping["train"] = {k: v for k, v in mapping["train"].items() if k != "seed"}
    return mapping


def together_refusal(settings_list: Sequence) -> str | None:
    """Why these settings cannot train together (one line), or None."""
    from src.systems import build

    if len(settings_list) < 2:
        return "a group needs at least 2 runs"
    first = settings_without_seed(settings_list[0])
    for other in settings_list[1:]:
        if settings_without_seed(other) != first:
            return "the runs differ in more than train.seed"
    seeds = [s.train.seed for s in settings_list]
    if len(set(seeds)) != len(seeds):
        return f"train.seed repeats ({seeds})"
    train = settings_list[0].train
    if getattr(train, "num_tasks", 0) or getattr(train, "num_training_examples", 0):
        return (
            "a finite pool (train.num_tasks, train.num_training_examples) is drawn from each seed outside "
            "the program; such seeds train one at a time"
        )
    if build(settings_list[0]).seed_parts() is None:
        return f"system {settings_list[0].system!r} does not train seeds together"
    return None


class Together(Trainer):
    """The stacked trainer the one loop runs: state [S, ...]; its rows hold one row per seed."""

    def __init__(self, trainers: Sequence[Trainer]):
        first = trainers[0]
        self.trainers = list(trainers)
        self.unit, self.steps, self.log_every = first.unit, first.steps, first.log_every
        self.checkpoint_every, self.keep_every = first.checkpoint_every, first.keep_every
        chunk, _ = first.seed_parts()
        self.seed_inputs = _stack([t.seed_parts()[1] for t in trainers])

        def stacked(states, seed_inputs, first_step, num_steps):
            return jax.vmap(lambda s, k: chunk(s, k, first_step, num_steps))(states, seed_inputs)

        self._chunk = jax.jit(stacked, static_argnums=3)
        self.first_losses: np.ndarray | None = None  # [S]
        self.pending: list[np.ndarray] = []  # [n, S] since the last log point

    def context(self):
        return self.trainers[0].context()

    def init_state(self) -> TrainState:
        return _stack([t.init_state() for t in self.trainers])

    def initial_records(self, state) -> dict:
        records = [t.initial_records(_take(state, i)) for i, t in enumerate(self.trainers)]
        return {k: np.stack([np.asarray(r[k]) for r in records]) for k in records[0]}

    def run_chunk(self, state, first, num_steps) -> Chunk:
        """The loop sees seed 0's losses, or NaN at a step where any seed diverges by the loop's
        rule against its own first loss; every seed's losses are in per_step["seed_loss"]."""
        out = self._chunk(state, self.seed_inputs, first, num_steps)
        interrupts.wait(out.losses)  # Ctrl-C honoured meanwhile
        losses = np.asarray(out.losses).T  # [n, S]
        if self.first_losses is None:
            self.first_losses = losses[0].copy()
        bad = first_bad_step_of_runs(losses, self.first_losses)
        seen = losses[:, 0].copy()
        if bad is not None:
            seen[bad] = np.nan
        self.pending.append(losses)
        per_step = {"seed_loss": losses, **{k: np.moveaxis(np.asarray(v), 0, 1) for k, v in out.per_step.items()}}
        return Chunk(out.state, seen, per_step, {k: np.asarray(v) for k, v in out.at_end.items()})

    def evaluate(self, state) -> dict:
        return {"seeds": [t.evaluate(_take(state, i)) for i, t in enumerate(self.trainers)]}

    def row(self, state, step, losses) -> dict:
        seed_losses = np.concatenate(self.pending)  # [n, S]
        self.pending = []
        return {"seeds": [t.row(_take(state, i), step, seed_losses[:, i]) for i, t in enumerate(self.trainers)]}


def seed_history(history: list[dict], i: int, unit: str) -> list[dict]:
    """Seed i's metrics rows from the group's (each row: unit, that seed's row, elapsed_s)."""
    return [
        {unit: row[unit], **row["seeds"][i], "elapsed_s": row["elapsed_s"]}
        for row in history
        if row["seeds"][i] is not None
    ]


def seed_progress(snapshot: Progress, i: int, first_loss: float, unit: str) -> Progress:
    per_step = {("loss" if k == "seed_loss" else k): v[:, i] for k, v in snapshot.per_step.items() if k != "loss"}
    at_log = {k: (v if k == "step" else v[:, i]) for k, v in snapshot.at_log.items()}
    return Progress(
        snapshot.step, _take(snapshot.state, i), per_step, at_log, first_loss, seed_history(snapshot.history, i, unit)
    )


def train_together(
    trainers: Sequence[Trainer], *, progress: bool = False, label: str = ""
) -> tuple[list[LoopResult], list[dict[int, Progress]]] | None:
    """Train every trainer's run as one program: per seed its LoopResult and its checkpoints
    ({step: Progress} at every multiple of `keep_every` and at the end), or None when a seed
    diverged (train those alone). Each result's `seconds` is the group's time divided by S."""
    group = Together(trainers)
    snapshots: list[Progress] = []

    def keep(snapshot: Progress) -> None:
        if snapshot.step == group.steps or (group.keep_every and snapshot.step % group.keep_every == 0):
            snapshots.append(snapshot)

    result = train(group, on_checkpoint=keep, progress=progress, label=label)
    if result.diverged:
        return None
    size, unit = len(trainers), group.unit
    results, checkpoints = [], []
    for i in range(size):
        first_loss = float(group.first_losses[i])
        part = seed_progress(
            Progress(result.step, result.state, result.per_step, result.at_log, first_loss, result.history),
            i,
            first_loss,
            unit,
        )
        final = (
            {k: v for k, v in part.history[-1].items() if k not in (unit, "train_loss", "elapsed_s")}
            if part.history
            else result.final["seeds"][i]
        )
        results.append(
            LoopResult(
                part.state, result.step, part.history, part.per_step, part.at_log, result.seconds / size, None, final
            )
        )
        checkpoints.append({s.step: seed_progress(s, i, first_loss, unit) for s in snapshots})
    return results, checkpoints
