"""The command line of the ICL benchmark (Zoology / miniseq), `python -m runners.recipe` (the
original's `uv run recipe.py`), built with tyro from the registries, into the settings of system
`lm` (src/systems/lm.py):

    python -m runners.recipe --choices
    python -m runners.recipe task:mqar model.seq_mixer:attention model.state_mixer:mlp --help
    python -m runners.recipe wandb:None task:mqar model.seq_mixer:attention model.state_mixer:mlp
    python -m runners.recipe task:mqar model.seq_mixer:gated_linear_attn --task.num_pairs 16 \\
        --model.width 32 --train.train_steps 500 --out runs/recipe_gla

`<component>:<name>` picks a registry entry (task, model.seq_mixer, model.state_mixer); dotted
flags override any option (`--task.num_pairs 4`, `--model.seq_mixer.feature_map relu`,
`--train.learning_rate 3e-3`). `wandb:on` (or offline, online) also logs the metrics rows to a
wandb run in the run directory, offline unless online (src/tracking.py); `wandb:None` (or off)
logs to metrics.jsonl only. Choices and flags are checked before any work (one line,
exit 2; src/cli/recipe_flags.py); so are the task's sizes (κ against the vocabulary, T against 2κ + queries).
"""

import dataclasses
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Sequence, Union

from src.flags import UsageError, fail
from src.cli.command import train_command, validated
from src.cli.recipe_flags import TRAIN_FLAGS, WANDB_CHOICES, RecipeTrain, check_argv
from src.cli.recipe_names import describe as describe_original_tasks, spelled_as_typed, translate
from src.mixer_spec import ALIASES, mixer_stack, registry_entry
from src.models.sequence_presets import BLOCKS, with_block
from src.registry import Choice, registry, state_note
from src.systems.lm import LMSettings, LMTrain, PairShape, lm_settings_unchecked
from src.tasks.objectives import tasks_for

PROG = "python -m runners.recipe"
COMPONENTS = {"task": "task", "model.seq_mixer": "seq_mixer", "model.state_mixer": "state_mixer"}
# The defaults: the original's recipe (T = 64, κ = 8, 2 layers, MLP) at a size that trains on 2 CPU
# cores (vocabulary 256 instead of 8,192, width 64 with 4 heads instead of 128 with 8).
DEFAULT_TASK = {"mqar": {"vocab_size": 256}}


def choices(kind: str) -> list[str]:
    """The names a component accepts: every registered entry of its kind (tasks: those a
    language model reads), the original's aliases first."""
    if kind == "task":
        return tasks_for("tokens", "pairs")
    aliases = ALIASES.get(kind, {})
    return list(aliases) + [n for n in registry(kind).names() if n not in aliases.values()]


def entry_of(kind: str, name: str):
    """The registry entry a component's name picks (the original's aliases applied)."""
    return registry_entry(kind, name)


def _variant(kind: str, name: str) -> type:
    """A frozen dataclass named `name` with the entry's options as fields (tyro's subcommand)."""
    entry = entry_of(kind, name)
    cls = type(name, (entry.options,), {"__doc__": entry.doc, "__module__": __name__})
    return dataclass(frozen=True)(cls)


def _union(kind: str, names: Sequence[str]):
    import tyro

    variants = {n: _variant(kind, n) for n in names}
    defaults = {n: v(**DEFAULT_TASK.get(n, {})) if kind == "task" else v() for n, v in variants.items()}
    typ = Union[tuple(Annotated[v, tyro.conf.subcommand(n, default=defaults[n])] for n, v in variants.items())]
    return typ, variants, defaults


def build_cli_types():
    """(the tyro root dataclass, {component: {name: variant class}})."""
    task_t, tasks, task_defaults = _union("task", choices("task"))
    seq_t, seqs, seq_defaults = _union("seq_mixer", choices("seq_mixer"))
    state_t, states, state_defaults = _union("state_mixer", choices("state_mixer"))

    @dataclass(frozen=True)
    class Model:
        """The `lm` preset of the one sequence family (src/models/sequence_presets.py)."""

        seq_mixer: seq_t = seq_defaults["attention"]
        state_mixer: state_t = state_defaults["mlp"]
        width: int = 64
        n_layer: int = 2
        n_head: int = 4
        # Linear layers on [B·T, D] rows (flat) or [B, T, D] (batched: runs before 2026-11-26)
        dense_layout: str = "flat"
        # ours, or zoology: Zoology's TransformerBlock (layer norm, identity state mixer, positions for attention
        # only, dropout 0.1 on the embeddings and attention weights, attention biases, tied read-out), which sets
        # those flags itself
        block: str = "ours"
        # the position encoding in every model (all) or only in one with an attention layer (attention)
        positions_for: str = "all"
        embed_dropout: float = 0.0  # dropout on the embeddings feeding layer 1, in training only
        tie_embeddings: bool = False  # the read-out is the embedding table transposed (one table, N(0, 0.02²))
        # a hybrid stack: the layers' sequence mixers, a comma list repeating over the layers (name or
        # name:option=value; a bare name takes its defaults, or model.seq_mixer's options where it names that mixer)
        seq_mixers: str = ""

    @dataclass(frozen=True)
    class Recipe:
        """Train a model of the `lm` family on an in-context task of the ICL benchmark (Zoology /
        miniseq) and report its accuracy."""

        task: task_t = task_defaults["mqar"]
        model: Model = field(default_factory=Model)
        train: RecipeTrain = field(default_factory=RecipeTrain)
        pairs: PairShape = field(default_factory=PairShape)
        out: str = "runs/recipe/<task>_<mixers>_<flags not at their defaults>_seed<seed>"
        overwrite: bool = False
        resume: bool = False
        quiet: bool = False
        skip_analysis: bool = False  # no analyses at the end (a pair task's ICL curve, ...)

    return Recipe, {"task": tasks, "model.seq_mixer": seqs, "model.state_mixer": states}


def to_settings(parsed) -> tuple[LMSettings, Path, bool, bool, bool, bool]:
    """(settings, out, overwrite, resume, quiet, skip_analysis) from tyro's result; UsageError (one line, in the
    recipe's flags) for sizes that cannot work."""

    def choice_of(kind, value):
        entry = entry_of(kind, type(value).__name__)
        return Choice(
            entry.name, entry.options(**{f.name: getattr(value, f.name) for f in dataclasses.fields(entry.options)})
        )

    task = choice_of("task", parsed.task)
    seq, state = choice_of("seq_mixer", parsed.model.seq_mixer), choice_of("state_mixer", parsed.model.state_mixer)
    m, tr, pairs = parsed.model, parsed.train, parsed.pairs
    flag_to_field = {flag: name for name, flag in TRAIN_FLAGS.items()}
    train = LMTrain(**{flag_to_field.get(f.name, f.name): getattr(tr, f.name) for f in dataclasses.fields(RecipeTrain)})
    settings = lm_settings(
        task,
        seq,
        state,
        width=m.width,
        n_layer=m.n_layer,
        n_head=m.n_head,
        train=train,
        pairs=pairs,
        dense_layout=m.dense_layout,
        seq_mixers=hybrid_mixers(m.seq_mixers, seq),
        block=m.block,
        positions_for=m.positions_for,
        embed_dropout=m.embed_dropout,
        tie_embeddings=m.tie_embeddings,
    )
    return settings, Path(parsed.out), parsed.overwrite, parsed.resume, parsed.quiet, parsed.skip_analysis


def hybrid_mixers(text: str, chosen: Choice) -> tuple[Choice, ...]:
    """--model.seq_mixers 'base_conv,based' (see mixer_stack)."""
    return mixer_stack(text, ",", "--model.seq_mixers", chosen)


def lm_settings(
    task: Choice,
    seq_mixer: Choice,
    state_mixer: Choice,
    *,
    block: str = "ours",
    positions_for: str = "all",
    embed_dropout: float = 0.0,
    tie_embeddings: bool = False,
    **shape,
) -> LMSettings:
    """The recipe's settings (src.systems.lm.lm_settings_unchecked of `shape`: width, n_layer, n_head,
    train, pairs, dense_layout, seq_mixers), validated: a UsageError, one line, in the recipe's
    flags. The block (`zoology`) is applied last, over the three model fields before it."""
    if block not in BLOCKS:
        raise UsageError(f"--model.block={block!r} is not accepted; accepted: {', '.join(BLOCKS)}")
    settings = lm_settings_unchecked(task, seq_mixer, state_mixer, **shape)
    model = replace(
        settings.model, positions_for=positions_for, embed_dropout=embed_dropout, tie_embeddings=tie_embeddings
    )
    return validated(replace(settings, model=with_block(model, block)), FLAGS)


# our settings -> the recipe's flags, for messages
FLAGS = {
    "task.options.": "--task.",
    "task": "task",
    "model.seq_mixer.options.": "--model.seq_mixer.",
    "model.width": "--model.width",
    "model.dense_layout": "--model.dense_layout",
    "model.seq_mixers": "--model.seq_mixers",
    "model.positions_for": "--model.positions_for",
    "model.embed_dropout": "--model.embed_dropout",
    "model.tie_embeddings": "--model.tie_embeddings",
    "model.n_layer": "--model.n_layer",
    "model.n_head": "--model.n_head",
    "train.steps": "--train.train_steps",
    "train.": "--train.",
    "pairs.": "--pairs.",
}


def parse(argv: Sequence[str]) -> tuple[LMSettings, Path, bool, bool, bool, bool, list[str]]:
    import tyro

    root, variants = build_cli_types()
    kept, notes = check_argv(translate(argv), variants)
    cli = lambda args: one_line_tyro(
        lambda: tyro.cli(root, args=args, prog=PROG, use_underscores=True, config=(tyro.conf.CascadeSubcommandArgs,))
    )
    parsed = cli(kept)
    settings, out, *flags = to_settings(parsed)
    if not any(t == "--out" or t.startswith("--out=") for t in kept):
        components = [t for t in kept if ":" in t and not t.startswith("-")]
        out = default_out(parsed, cli(components))
    return (settings, out, *flags, notes)


BOX = "╭╮╰╯│─┃━┏┓┗┛"


def one_line_tyro(call):
    """tyro's result of `call()`; an error tyro would draw as a box of several lines (exit 2) becomes
    a UsageError of one line (check_argv refuses what it can first, in our words; this catches
    the rest). --help passes through."""
    import contextlib
    import io

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return call()
    except SystemExit as exit_:
        if exit_.code in (0, None):
            sys.stderr.write(err.getvalue())
            raise
        lines = [line.strip(BOX + " ") for line in err.getvalue().splitlines()]
        words = [line for line in lines if line and not line.startswith(("For full helptext", "usage:"))]
        title = words[0] if words else "not accepted"
        raise UsageError(f"{title}: {' '.join(words[1:])[:400]}" if len(words) > 1 else title) from None


def default_out(parsed, defaults) -> Path:
    """runs/recipe/<task>_<sequence mixer>_<state mixer>, then _<field><value> for every flag
    whose value is not the default of the chosen components, then _seed<seed>: each iteration of
    a loop over any flag gets its own run. A hybrid stack (--model.seq_mixers) takes the sequence
    mixer's place, spelt by src.mixer_spec.stack_word (e.g. mqar_ema+attention_mlp_seed0)."""
    from src.mixer_spec import stack_word

    mine, theirs = _leaves(dataclasses.asdict(parsed)), _leaves(dataclasses.asdict(defaults))
    stack = mine.get("model.seq_mixers")
    words = [
        type(parsed.task).__name__,
        stack_word(stack) if stack else type(parsed.model.seq_mixer).__name__,
        type(parsed.model.state_mixer).__name__,
    ]
    skip = {"out", "overwrite", "resume", "quiet", "skip_analysis", "train.seed", "model.seq_mixers"}
    changed = [k for k in mine if k not in skip and mine[k] != theirs.get(k)]
    last = [k.rsplit(".", 1)[-1] for k in changed]
    for key, short in zip(changed, last):
        words.append(f"{short if last.count(short) == 1 else key}{mine[key]}")
    return Path("runs/recipe") / "_".join(words + [f"seed{parsed.train.seed}"])


def _leaves(tree: dict, prefix: str = "") -> dict:
    """{dotted key: value} of a nested dict."""
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def print_choices() -> None:
    print("task choices of the ICL benchmark (its names; each is one of the tasks listed after it):")
    for line in describe_original_tasks():
        print(line)
    for component, kind in COMPONENTS.items():
        print(f"{component} choices:")
        for name in choices(kind):
            entry = entry_of(kind, name)
            print(f"  {component}:{name:22s} {entry.doc}{state_note(entry)}")
    print(
        f"wandb choices: {', '.join(f'wandb:{n}' for n in WANDB_CHOICES)} (on: an offline wandb run in "
        f"the run directory, besides metrics.jsonl)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--choices" in argv:
        print_choices()
        return 0
    try:
        settings, out, overwrite, resume, quiet, skip_analysis, notes = parse(argv)
    except UsageError as err:
        return fail(PROG, UsageError(spelled_as_typed(str(err), argv)))
    wandb = WANDB_CHOICES[notes[-1].partition(":")[2]] if notes else None
    return train_command(
        PROG,
        settings,
        out,
        runner="runners.recipe",
        argv=argv,
        overwrite=overwrite,
        resume=resume,
        quiet=quiet,
        wandb=wandb,
        analyses=() if skip_analysis else None,
    )
