"""Bounds checked before any work: integer ranges of every size a user can set (one table, used
by every command line, by config files and by sweep dry runs) and a memory estimate compared with
the memory this machine has free.

    check_sizes(layers=3, heads=4, batch_size=64)          # ValueError naming the first bad one
    check_memory(training_bytes(...), "this run")           # ValueError when it cannot fit

The ranges are generous (far beyond anything that trains on a laptop) but finite, so a typo such
as `--num_layers 100000` is refused in one line instead of compiling for an hour.
"""

from __future__ import annotations

import contextvars
import os

from src.scoped import holding

SEED_LIMIT = 2**32  # seeds are 32-bit (numpy's generators take no more)

# setting -> (lowest, highest) accepted integer
RANGES: dict[str, tuple[int, int]] = {
    "seed": (0, SEED_LIMIT - 1),
    "layers": (1, 256),
    "heads": (1, 256),
    "width": (1, 16_384),  # model width / n_embd / key size
    "d": (1, 4_096),  # input dimension
    "points": (1, 100_000),  # in-context examples / sequence positions
    "batch_size": (1, 1 << 20),
    "eval_size": (1, 1 << 22),
    "steps": (1, 10**9),
    "pool": (1, 1 << 24),  # a finite pool's task vectors or prompts (src/tasks/pools.py)
}
FLOAT_BYTES = 4
HEADROOM = 0.8  # use at most this fraction of the free memory
# Evaluation and analyses run their prompts in blocks of at most this many estimated bytes
# (src/batched.py); a fixed figure, not the memory free, so the blocks depend on settings only.
EVAL_BLOCK_BYTES = 1 << 30


def range_text(setting: str) -> str:
    low, high = RANGES[setting]
    return f"an integer in [{low}, {high}]"


def check_sizes(*named: tuple[str, str, int], **values: int) -> None:
    """ValueError for the first value outside its RANGES entry. Keyword form: the keyword is the
    kind (`layers=3`), or kind__label to name the setting (`width__key_size=20`); positional
    form for dotted names: ("layers", "model.n_layer", 3)."""
    items = list(named) + [
        (k.partition("__")[0], k.partition("__")[2] or k.partition("__")[0], v) for k, v in values.items()
    ]
    for kind, label, value in items:
        low, high = RANGES[kind]
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise ValueError(f"{label}={value!r} is out of range; accepted: {range_text(kind)}")


def forward_work(*, tokens: int, width: int, layers: int, heads: int) -> int:
    """An estimate of a forward pass's arithmetic per prompt, in operations (for budgets of work,
    not of memory): per layer the attention's two products (4 T^2 D), the dense maps (32 T D^2:
    queries, keys, values, output and a gated MLP of hidden 4D, a multiply-add two operations)
    and 30 operations per attention score (masks, position biases and the softmax, which on a
    CPU cost about as much as the products: the length study's Llama, 16 layers of width 32 at
    402 tokens, ran 64 prompts in 8.2 s on 2 cores here, 9 G of these a second)."""
    per_layer = 4 * tokens * tokens * width + 32 * tokens * width * width + 30 * heads * tokens * tokens
    return layers * per_layer


def forward_bytes(*, tokens: int, width: int, layers: int, heads: int, keep_attention: bool = False) -> int:
    """An estimate (an over-estimate on purpose) of the memory a forward pass needs per prompt,
    in bytes: one layer's attention scores [H, T, T] and about eight [T, D] tensors at a time,
    twice (the layer's and the residual stream's), or every layer's when the attention maps are
    kept."""
    per_layer = heads * tokens * tokens + 8 * tokens * width
    return FLOAT_BYTES * per_layer * (layers + 1 if keep_attention else 2)


def training_bytes(
    *,
    batch_size: int,
    eval_size: int,
    tokens: int,
    width: int,
    layers: int,
    heads: int,
    keep_attention: bool = False,
    hidden_ratio: float = 0.0,
    score_copies: int = 1,
) -> int:
    """An estimate (an over-estimate on purpose) of the memory one run needs, in bytes.

    Training keeps every layer's activations for the backward pass: per sequence and layer the
    attention scores [H, T, T] and about eight [T, D] tensors, twice (forward and gradients), and
    a gated state sublayer's three [T, rD] tensors where `hidden_ratio` r is given, and
    `score_copies` [H, T, T] tensors where a position bias or mask keeps more than the scores (the
    length study's Llama with ALiBi, r = 4, 2 copies, at width 256 and 16 layers: 36.5 GiB; XLA
    asked for 29.5 GB at once here).
    Evaluation runs the eval set in one batch, forward only: one layer's tensors at a time, twice
    (the layer's and the residual stream's), or every layer's when the attention maps are kept.
    Parameters: about 4 D^2 per layer, times 4 (values, gradients and Adam's two moments).
    Inside `reading_a_run` the training term is left out. Measured: the length study's config at
    width 32 and 16 layers (batch 64, 402 tokens) peaked at 17.7 GiB resident in training here,
    estimated 22.7 GiB."""
    per_layer = heads * tokens * tokens + 8 * tokens * width
    extra = (score_copies - 1) * heads * tokens * tokens + round(3 * hidden_ratio * tokens * width)
    train = 0 if _READING.get() else 2 * batch_size * layers * (per_layer + extra)
    evaluate = eval_size * per_layer * (layers + 1 if keep_attention else 2)
    params = 4 * layers * 4 * width * width
    return FLOAT_BYTES * (train + evaluate + params)


def available_bytes() -> int | None:
    """Memory this machine can give now (MemAvailable on Linux), or None when unknown."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


_READING = contextvars.ContextVar("reading_a_run", default=False)


def reading_a_run():
    """Inside: `training_bytes` counts what reading a finished run back needs (its evaluation and
    parameters, not training's activations): a run trained elsewhere, on a machine with more
    memory, can still be analysed here (src.rundir load_settings)."""
    return holding(_READING, True)


def check_memory(
    needed: int,
    what: str = "this run",
    accepted: str = "a smaller batch_size, eval_size, number of points or model",
    parts: str = "batch, eval set and model",
) -> None:
    """ValueError (one line) when `needed` bytes exceed HEADROOM of the free memory."""
    free = available_bytes()
    if free is not None and needed > HEADROOM * free:
        raise ValueError(
            f"{what} needs about {needed / 2**30:.1f} GiB ({parts}) "
            f"but this machine has {free / 2**30:.1f} GiB free; accepted: {accepted}"
        )
