"""The one training loop of every system: compiled chunks of steps, one divergence rule, one
result type (the optimizer comes from the one factory, src/optim.py).

A system builds a `Trainer` from its settings (src/systems/<name>.py): how to initialise the
training state, a jitted `run_chunk` that takes `num_steps` steps from step `first` (data drawn
on device from the step number, so results do not depend on how steps are chunked), and what a
metrics row holds. A chunk is compiled in one place, `scan_chunk` (and `gradient_chunk` around the
one gradient step, src/optim.py): a system supplies its loss and what a step draws
(src.systems.GradientTrainer). The loop only cuts the run into chunks (ending at every log point, every
checkpoint and the end), checks each chunk for divergence, and calls back with rows and
checkpoints; Python never runs inside a chunk.

Divergence (every system): a training loss that is not finite, or above EXPLODED times the
run's first loss, or parameters that are not finite; the run stops, keeps the state of the last
good chunk and says at which step. Checkpointing wraps the loop (`Progress` out through
`on_checkpoint`, back in through `start`), so a resumed run continues bit for bit.

Glossary: n steps of a chunk, K log points.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from src import interrupts


EXPLODED = 1e6  # a loss above EXPLODED x the first loss counts as diverged


# ---------------------------------------------------------------------------
# What a system gives the loop


class TrainState(NamedTuple):
    params: Any
    opt_state: Any


class Chunk(NamedTuple):
    """What `Trainer.run_chunk` returns for n steps."""

    state: TrainState
    losses: Any  # [n] training loss of every step
    per_step: dict = {}  # name -> [n, ...] kept for the whole run
    at_end: dict = {}  # name -> [...] recorded when the chunk ends a log interval


class Trainer:
    """A system's training, as the loop sees it. Subclasses set the sizes and implement
    `init_state`, `run_chunk` and `evaluate`."""

    unit = "step"  # what a step is called in rows and messages ("epoch")
    steps: int = 1
    log_every: int = 1
    checkpoint_every: int = 0  # 0: only at the end
    keep_every: int = 0  # also keep checkpoint_<step>.npz at multiples of this; 0: never

    def init_state(self) -> TrainState:
        raise NotImplementedError

    def run_chunk(self, state: TrainState, first: int, num_steps: int) -> Chunk:
        raise NotImplementedError

    def evaluate(self, state: TrainState) -> dict[str, float]:
        """The eval scores of a state (the fields of a metrics row after train_loss)."""
        return {}

    def row(self, state: TrainState, step: int, losses: np.ndarray) -> dict | None:
        """The metrics row at log point `step` (losses: every step since the last one), or None."""
        return {"train_loss": float(np.mean(losses)), **self.evaluate(state)}

    def initial_records(self, state: TrainState) -> dict:
        """`at_end` records of the initial state (the log point at step 0), if any."""
        return {}

    def work_per_step(self) -> float | None:
        """Parameters x tokens a step reads (a step's cost, for the first chunk's size), or None."""
        return None

    def headline(self, row: dict) -> dict[str, str]:
        """A few numbers of a row for the progress bar."""
        return {k: f"{v:.4f}" for k, v in row.items() if k.startswith("eval_") and isinstance(v, float)}

    def context(self):
        """Entered around the whole loop (e.g. float64 mode)."""
        return contextlib.nullcontext()


@dataclass
class Progress:
    """Where a run stands: what a checkpoint holds and what `train(start=...)` continues from."""

    step: int
    state: TrainState
    per_step: dict[str, np.ndarray]  # name -> [step, ...]
    at_log: dict[str, np.ndarray]  # name -> [K, ...], "step" included
    first_loss: float | None
    history: list[dict] = field(default_factory=list)


@dataclass
class LoopResult:
    state: TrainState  # the last good state
    step: int  # steps done
    history: list[dict]  # one metrics row per log point
    per_step: dict[str, np.ndarray]  # "loss" and the trainer's per-step records
    at_log: dict[str, np.ndarray]  # "step" and the trainer's log-point records
    seconds: float
    diverged: str | None = None  # why training stopped early, or None
    final: dict = field(default_factory=dict)  # the scores of `state` (the last row's)


# ---------------------------------------------------------------------------
# The loop


def scan_chunk(one_step: Callable) -> Callable:
    """The one place a chunk of steps is compiled: `one_step(carry, step, seed_input) -> (carry,
    out)`, with whatever it draws drawn from the step number, gives the pure chunk(carry,
    seed_input, first_step, num_steps) -> (carry, out stacked over the steps). Not jitted: a
    trainer jits it (num_steps static), and seeds trained together vmap it over `seed_input`
    (src/together.py)."""

    def chunk(carry, seed_input, first_step, num_steps):
        return jax.lax.scan(lambda c, step: one_step(c, step, seed_input), carry, first_step + jnp.arange(num_steps))

    return chunk


def gradient_chunk(loss_fn: Callable, optimizer, draw: Callable) -> Callable:
    """The chunk of a system trained by gradient steps (every system but the dynamics paper's
    epochs): `draw(seed_input, step) -> (batch, records)` gives the step's loss arguments (a tuple:
    loss_fn(params, *batch)) and the per-step records it keeps ({} or name -> scalar); each step is
    the one gradient step (src/optim.py). Returns the pure chunk(params, opt_state, seed_input,
    first_step, num_steps) -> (params, opt_state, losses [n], records {name: [n]})."""
    from src.optim import gradient_step

    step_on = gradient_step(loss_fn, optimizer)

    def one_step(carry, step, seed_input):
        batch, records = draw(seed_input, step)
        params, opt_state, loss = step_on(*carry, *batch)
        return (params, opt_state), (loss, records)

    scanned = scan_chunk(one_step)

    def chunk(params, opt_state, seed_input, first_step, num_steps):
        (params, opt_state), (losses, records) = scanned((params, opt_state), seed_input, first_step, num_steps)
        return params, opt_state, losses, records

    return chunk


def first_bad_step(losses: np.ndarray, first_loss: float) -> int | None:
    """Index of the first non-finite or exploded loss of a chunk, or None."""
    bad = ~np.isfinite(losses) | (losses > EXPLODED * max(abs(first_loss), 1e-30))
    return int(np.argmax(bad)) if bad.any() else None


def first_bad_step_of_runs(losses: np.ndarray, first_losses: np.ndarray) -> int | None:
    """The first step of a chunk at which any of S runs trained together diverges, each by
    `first_bad_step` against its own first loss (losses [n, S], first_losses [S]), or None."""
    bad = [first_bad_step(losses[:, i], first_loss) for i, first_loss in enumerate(first_losses)]
    return min((b for b in bad if b is not None), default=None)


def tree_finite(tree) -> bool:
    return all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree_util.tree_leaves(tree))


def _stack(records: list[dict]) -> dict[str, np.ndarray]:
    keys = records[0].keys() if records else ()
    return {k: np.stack([np.asarray(r[k]) for r in records]) for k in keys}


def _concat(chunks: list[dict]) -> dict[str, np.ndarray]:
    keys = chunks[0].keys() if chunks else ()
    return {k: np.concatenate([np.asarray(c[k]) for c in chunks]) for k in keys}


CHUNK_SECONDS = 5.0  # a chunk whose step time is known computes for about this long at most
FIRST_STEP_PARAMS = 1_000_000  # a model this large starts with a one-step chunk on a CPU
FIRST_STEP_WORK = 1e9  # ... and so does a step of this many parameter x token products
# after the first chunk, chunks are at least this long: XLA compiles a one-step chunk less well
# (the length study's width-64 Llama: 3.4-3.7 s a step in one-step chunks, 2.5-2.9 in 2- to 8-step ones)
LEAST_STEPS = 2


class ChunkSizer:
    """Where the chunk that starts at a step ends: at the next log point, checkpoint or the end
    (`boundaries`), sooner where steps are slow, so that the bar moves every few seconds. A model
    of FIRST_STEP_PARAMS parameters or more on a CPU starts with one step; after each chunk the
    cap is the largest power of two of steps that computes within CHUNK_SECONDS, and at least
    LEAST_STEPS (few distinct chunk lengths, each compiled once). So does a step whose `work` (the trainer's
    `work_per_step`) is FIRST_STEP_WORK or more: the length study's width-64 Llama has 1.3e5
    parameters but reads 64 prompts of 402 tokens a step (3.3e9; 2.5 s a step on 2 cores, and its
    bar sat still for the 100 steps to the first log point). How a run is chunked changes none of
    its numbers (tests/test_resume.py reruns every system in one-step chunks)."""

    def __init__(self, state: TrainState, work: float | None = None):
        params = sum(int(np.size(leaf)) for leaf in jax.tree_util.tree_leaves(state.params))
        heavy = params >= FIRST_STEP_PARAMS or (work is not None and work >= FIRST_STEP_WORK)
        slow = heavy and jax.default_backend() == "cpu"  # an accelerator's step is ms
        self.cap = 1 if slow else None
        self.compiled: set[int] = set()

    def end(self, trainer: Trainer, step: int) -> int:
        end = boundaries(trainer, step)
        return end if self.cap is None else min(end, step + self.cap)

    def measured(self, num_steps: int, dispatched_s: float, total_s: float) -> None:
        """A chunk of `num_steps` took `total_s`, of which `dispatched_s` after run_chunk returned
        (the computation alone where the length was new: its compilation comes before that)."""
        seconds = total_s if num_steps in self.compiled else dispatched_s
        self.compiled.add(num_steps)
        if seconds > 0:
            fit = max(1.0, CHUNK_SECONDS * num_steps / seconds)
            self.cap = max(LEAST_STEPS, 2 ** int(math.log2(fit)))


def boundaries(trainer: Trainer, step: int) -> int:
    """The end of the chunk that starts at `step`: the next log point, checkpoint or the end."""
    stops = [trainer.steps, step + trainer.log_every - step % trainer.log_every]
    if trainer.checkpoint_every:
        stops.append(step + trainer.checkpoint_every - step % trainer.checkpoint_every)
    return min(stops)


def train(
    trainer: Trainer,
    *,
    start: Progress | None = None,
    on_log: Callable[[dict], None] | None = None,
    on_checkpoint: Callable[[Progress], None] | None = None,
    progress: bool = False,
    label: str = "",
) -> LoopResult:
    """Run `trainer` from scratch or from `start` to `trainer.steps`."""
    with trainer.context():
        return _train(trainer, start, on_log, on_checkpoint, progress, label)


def _fresh_start(trainer) -> Progress:
    """Step 0: the trainer's initial state and what it records before any step."""
    state = trainer.init_state()
    initial = trainer.initial_records(state)
    return Progress(0, state, {}, _stack([{"step": 0, **initial}]) if initial else {}, None)


def _records_of(trainer, start: Progress) -> tuple[list, list, list, list]:
    """(history rows, per-step record pieces, at-log records, losses since the last log point) of
    `start`, as the loop appends to them. A run resumed between two log points logs the mean over
    the same steps as one that was never stopped."""
    step = start.step
    per_step = [start.per_step] if start.per_step else []
    at_log = [{k: v[i] for k, v in start.at_log.items()} for i in range(len(start.at_log.get("step", [])))]
    since_log = step - step % trainer.log_every
    pending = (
        [np.asarray(start.per_step["loss"])[since_log:step]]
        if step % trainer.log_every and "loss" in start.per_step
        else []
    )
    return list(start.history), per_step, at_log, pending


def _divergence(unit: str, bad_loss, first_loss: float, step: int, bad: int) -> str:
    """The one line saying why training stopped at the chunk's step `bad` (0-based) after `step`."""
    what = (
        "not finite"
        if not np.isfinite(bad_loss)
        else (
            f"above {EXPLODED:g} x the first loss"
            if bad_loss > EXPLODED * abs(first_loss)
            else "finite, but the parameters are not"
        )
    )
    return f"training loss {what} at {unit} {step + bad + 1}; stopped and kept the parameters of {unit} {step}"


def _logged(trainer, row: dict, step: int, begin: float, bar, on_log) -> dict:
    """A log row with its step and elapsed seconds, shown on the bar and handed to `on_log`."""
    row = {trainer.unit: step, **row, "elapsed_s": round(time.perf_counter() - begin, 3)}
    bar.set_postfix(trainer.headline(row))
    if on_log is not None:
        on_log(row)
    return row


def _train(trainer, start, on_log, on_checkpoint, progress, label) -> LoopResult:
    from tqdm import tqdm

    start = start if start is not None else _fresh_start(trainer)
    step, state, first_loss = start.step, start.state, start.first_loss
    history, per_step, at_log, pending = _records_of(trainer, start)
    diverged = None
    begin = time.perf_counter()
    kind = dict(unit=trainer.unit, disable=not progress, leave=False, dynamic_ncols=True)
    bar = tqdm(total=trainer.steps, initial=step, desc=label, **kind)

    def snapshot() -> Progress:
        return Progress(step, state, _concat(per_step), _stack(at_log), first_loss, list(history))

    sizer = ChunkSizer(state, trainer.work_per_step())
    while step < trainer.steps:
        interrupts.check()  # a Ctrl-C that a library swallowed stops here
        n = sizer.end(trainer, step) - step
        called = time.perf_counter()
        chunk = trainer.run_chunk(state, step, n)
        dispatched = time.perf_counter()
        interrupts.wait(chunk.losses)  # Ctrl-C honoured while the chunk computes
        computed = time.perf_counter()
        sizer.measured(n, computed - dispatched, computed - called)
        losses = np.asarray(chunk.losses)
        first_loss = float(losses[0]) if first_loss is None else first_loss
        bad = first_bad_step(losses, first_loss)
        if bad is None and not tree_finite(chunk.state.params):
            bad = n - 1
        if bad is not None:
            per_step.append({"loss": losses[:bad], **{k: np.asarray(v)[:bad] for k, v in chunk.per_step.items()}})
            diverged = _divergence(trainer.unit, losses[bad], first_loss, step, bad)
            break
        state, step = chunk.state, step + n
        per_step.append({"loss": losses, **{k: np.asarray(v) for k, v in chunk.per_step.items()}})
        pending.append(losses)
        bar.update(n)
        if step % trainer.log_every == 0 or step == trainer.steps:
            if chunk.at_end and step % trainer.log_every == 0:
                at_log.append({"step": step, **{k: np.asarray(v) for k, v in chunk.at_end.items()}})
            row = trainer.row(state, step, np.concatenate(pending))
            pending = []
            if row is not None:
                history.append(_logged(trainer, row, step, begin, bar, on_log))
        checkpoint_due = trainer.checkpoint_every and step % trainer.checkpoint_every == 0
        if on_checkpoint is not None and (checkpoint_due or step == trainer.steps):
            on_checkpoint(snapshot())
    bar.close()
    seconds = time.perf_counter() - begin
    if history:
        final = {k: v for k, v in history[-1].items() if k not in (trainer.unit, "train_loss", "elapsed_s")}
    else:  # stopped in the first chunk: score the initial state
        final = trainer.evaluate(state)
    return LoopResult(state, step, history, _concat(per_step), _stack(at_log), seconds, diverged, final)


def chunk_timer(trainer: Trainer, chunk_steps: int = 50) -> Callable[[], float]:
    """Compiles `trainer`'s chunk of `chunk_steps` steps and returns a function that times one more
    chunk (from the initial state, at the next steps) in ms per step: rounds a caller can
    interleave with another program's (scripts/bench/compare_originals.py)."""
    with trainer.context():
        state = trainer.init_state()
        jax.block_until_ready(trainer.run_chunk(state, 0, chunk_steps).losses)
    rounds = [0]

    def one_round() -> float:
        rounds[0] += 1
        with trainer.context():
            begin = time.perf_counter()
            jax.block_until_ready(trainer.run_chunk(state, chunk_steps * rounds[0], chunk_steps).losses)
            return 1000.0 * (time.perf_counter() - begin) / chunk_steps

    return one_round


def ms_per_step(trainer: Trainer, chunk_steps: int = 50, repeats: int = 3) -> float:
    """Median ms per training step of `trainer`'s compiled chunk, after compilation (make bench)."""
    import statistics

    one_round = chunk_timer(trainer, chunk_steps)
    return statistics.median(one_round() for _ in range(repeats))


def step_flops(trainer: Trainer) -> float | None:
    """FLOPs of one training step of `trainer`, from XLA's cost analysis of a one-step chunk
    (parameters and losses kept, so the backward pass and the update are counted); None where the
    backend gives no analysis (make bench)."""
    with trainer.context():
        state = trainer.init_state()
        jax.block_until_ready(trainer.run_chunk(state, 0, 1).losses)  # whatever a system prepares once
        try:
            compiled = jax.jit(lambda s: tuple(trainer.run_chunk(s, 0, 1))[:2]).lower(state).compile()
            cost = compiled.cost_analysis()
        except Exception:  # the analysis is best effort across jaxlib versions and backends
            return None
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    flops = float((cost or {}).get("flops", 0.0))
    return flops if flops > 0 else None
