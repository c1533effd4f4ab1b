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
exit 2); so are the task's sizes (κ against the vocabulary, T against 2κ + queries).
"""
import dataclasses
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Sequence, Union

from src.flags import UsageError, fail
from src.cli.command import train_command, validated
from src.cli.recipe_names import describe as describe_original_tasks, spelled_as_typed, translate
from src.mixer_spec import ALIASES, mixer_stack, registry_entry
from src.models.sequence import BLOCKS, with_block
from src.registry import Choice, registry, state_note
from src.systems.lm import LMSettings, LMTrain, PairShape, lm_settings_unchecked
from src.tracking import WandbSpec
from src.tasks.objectives import objective_of, tasks_for

PROG = "python -m runners.recipe"
COMPONENTS = {"task": "task", "model.seq_mixer": "seq_mixer", "model.state_mixer": "state_mixer"}
# The defaults: the original's recipe (T = 64, κ = 8, 2 layers, MLP) at a size that trains on 2 CPU
# cores (vocabulary 256 instead of 8,192, width 64 with 4 heads instead of 128 with 8).
VALUE_WITH_COLON = {"--model.seq_mixers"}     # flags whose value may hold name:option=value (not a component)
DEFAULT_TASK = {"mqar": {"vocab_size": 256}}
DEFAULT_CHOICE = {"task": "mqar", "model.seq_mixer": "attention", "model.state_mixer": "mlp"}


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


# The recipe's training flags (--train.*): LMTrain's fields, `steps` under the flag name the
# recipe has always used, --train.train_steps.
TRAIN_FLAGS = {"steps": "train_steps"}
RecipeTrain = dataclasses.make_dataclass(
    "RecipeTrain", [(TRAIN_FLAGS.get(f.name, f.name), f.type, dataclasses.field(default=f.default))
                    for f in dataclasses.fields(LMTrain)], frozen=True)


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
        """The `lm` preset of the one sequence family (src/models/sequence.py)."""
        seq_mixer: seq_t = seq_defaults["attention"]
        state_mixer: state_t = state_defaults["mlp"]
        width: int = 64
        n_layer: int = 2
        n_head: int = 4
        dense_layout: str = "flat"   # Linear layers on [B·T, D] rows (flat) or [B, T, D] (batched: runs before 2026-11-26)
        block: str = "ours"          # ours, or zoology: Zoology's TransformerBlock (layer norm, identity state mixer, positions for attention only, dropout 0.1 on the embeddings and attention weights, attention biases, tied read-out), which sets those flags itself
        positions_for: str = "all"   # the position encoding in every model (all) or only in one with an attention layer (attention)
        embed_dropout: float = 0.0   # dropout on the embeddings feeding layer 1, in training only
        tie_embeddings: bool = False  # the read-out is the embedding table transposed (one table, N(0, 0.02²))
        seq_mixers: str = ""         # a hybrid stack: the layers' sequence mixers, a comma list repeating over the layers (name or name:option=value; a bare name takes its defaults, or model.seq_mixer's options where it names that mixer)

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
        skip_analysis: bool = False     # no analyses at the end (a pair task's ICL curve, ...)

    return Recipe, {"task": tasks, "model.seq_mixer": seqs, "model.state_mixer": states}


# the benchmark's wandb:<choice> -> what a run logs besides metrics.jsonl (src/tracking.py)
WANDB_CHOICES = {"None": None, "off": None, "on": WandbSpec(), "offline": WandbSpec(),
                 "online": WandbSpec(mode="online")}


def check_argv(argv: Sequence[str], variants: dict) -> tuple[list[str], list[str]]:
    """(argv for tyro, notes). One-line UsageError for an unknown component, choice or flag."""
    chosen = dict(DEFAULT_CHOICE)
    picked: dict[str, str] = {}
    kept, notes = [], []
    for previous, token in zip([None, *argv], argv):
        if previous in VALUE_WITH_COLON:          # tyro reads a value with ':' only as --flag=value
            kept[-1] = f"{previous}={token}"
            continue
        if ":" in token and not token.startswith("-"):
            component, _, name = token.partition(":")
            if component == "wandb":
                if name not in WANDB_CHOICES:
                    raise UsageError(f"{token} is unknown; accepted: {', '.join(f'wandb:{n}' for n in WANDB_CHOICES)}")
                notes.append(f"wandb:{name}")
                continue
            if component not in variants:
                raise UsageError(f"{token!r}: unknown component {component!r}; accepted: "
                                 f"{', '.join(list(variants) + ['wandb'])}")
            if name not in variants[component]:
                raise UsageError(f"{component}:{name} is unknown; accepted: {', '.join(variants[component])}")
            if component in picked:
                raise UsageError(f"{token}: {component} is already chosen ({component}:{picked[component]}); "
                                 f"accepted: one {component}:NAME")
            chosen[component] = picked[component] = name
        kept.append(token)
    types = {"--out": "str", "--help": None, "-h": None, "--overwrite": None, "--quiet": None,
             "--resume": None, "--skip_analysis": None, "--no_overwrite": None, "--no_quiet": None,
             "--no_resume": None, "--no_skip_analysis": None}
    types |= {f"--train.{f.name}": f.type for f in dataclasses.fields(RecipeTrain)}
    types |= {f"--pairs.{f.name}": f.type for f in dataclasses.fields(PairShape)}
    types |= {f"--model.{n}": "int" for n in ("width", "n_layer", "n_head")}
    types["--model.dense_layout"] = "str"
    types["--model.seq_mixers"] = "str"
    types |= {"--model.block": "str", "--model.positions_for": "str", "--model.embed_dropout": "float",
              "--model.tie_embeddings": "bool", "--model.no_tie_embeddings": "bool"}
    for component, name in chosen.items():
        for f in dataclasses.fields(variants[component][name]):
            types[f"--{component}.{f.name}"] = f.type
            if _type_name(f.type) == "bool":
                types[f"--{component}.no_{f.name}"] = f.type
    if objective_of(chosen["task"]).inputs == "tokens":         # --pairs.* shape the pair tasks only
        pairs = next((t for t in kept if t.startswith("--pairs.")), None)
        if pairs is not None:
            raise UsageError(f"{pairs.partition('=')[0]} has no effect on the token task task:{chosen['task']} "
                             f"(it shapes the pair tasks: {', '.join(tasks_for('pairs'))}); accepted: the "
                             "command without it, or a pair task")
    block_conflict(kept)
    accepted = ", ".join(sorted(t for t in types if t.startswith("--")))
    i = 0
    while i < len(kept):
        token = kept[i]
        i += 1
        if not token.startswith("-"):
            if ":" not in token:
                raise UsageError(f"{token!r} is neither a COMPONENT:NAME choice nor the value of a flag; "
                                 f"accepted: choices such as task:mqar, and {accepted}")
            continue
        flag, has_value, value = token.partition("=")
        if flag not in types:
            raise UsageError(f"{flag} is not an option of {' '.join(f'{c}:{n}' for c, n in chosen.items())}; "
                             f"accepted: {accepted}")
        kind = _type_name(types[flag])
        if kind in (None, "bool"):
            if has_value:
                raise UsageError(f"{token!r}: {flag} is a switch and takes no value; accepted: {flag} alone")
            continue
        if kind == "ints" and not has_value:       # a tuple: the integers that follow
            while i < len(kept) and not kept[i].startswith("--") and ":" not in kept[i]:
                if not _parses(kept[i], "int"):
                    raise UsageError(f"{flag} {kept[i]!r} is not an int; accepted: {flag} <int> [<int> ...]")
                i += 1
            continue
        if not has_value:
            if i >= len(kept) or kept[i].startswith("--"):
                raise UsageError(f"{flag} needs a value; accepted: {flag} <{kind}>")
            value, i = kept[i], i + 1
        if not _parses(value, kind):
            raise UsageError(f"{flag}={value!r} is not a{'n' if kind == 'int' else ''} {kind}; accepted: {flag} <{kind}>")
    return kept, notes


# what --model.block zoology sets itself: a token naming one of these beside it is refused
BLOCK_SETS = ("model.state_mixer:", "--model.positions_for", "--model.embed_dropout", "--model.tie_embeddings",
              "--model.no_tie_embeddings", "--model.seq_mixer.dropout", "--model.seq_mixer.bias",
              "--model.seq_mixer.no_bias")


def block_conflict(kept: Sequence[str]) -> None:
    """UsageError (one line) where --model.block zoology stands beside a flag or choice it sets."""
    values = [v for flag, v in zip(kept, kept[1:] + [""]) if flag == "--model.block"]
    values += [t.partition("=")[2] for t in kept if t.startswith("--model.block=")]
    if "zoology" not in values:
        return
    clash = next((t for t in kept if t.startswith(BLOCK_SETS) and (t.startswith("model.") or
                                                                   t.partition("=")[0] in BLOCK_SETS)), None)
    if clash is not None:
        raise UsageError(f"{clash.partition('=')[0]} beside --model.block zoology: the block sets it (layer norm, "
                         "state mixer identity, positions for attention only, dropout 0.1, attention biases, "
                         "tied embeddings); accepted: one or the other")


def _type_name(annotation) -> str | None:
    """int, float, str or bool (an optional one: `X | None`, its X), ints (`tuple[int, ...]`), or None."""
    name = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    name = name.removesuffix(" | None")
    if name in ("tuple[int, ...]", "Tuple[int, ...]"):
        return "ints"
    return {"int": "int", "float": "float", "str": "str", "bool": "bool"}.get(name)


def _parses(value: str, kind: str) -> bool:
    try:
        {"int": int, "float": float, "str": str, "ints": int}[kind](value)
        return True
    except ValueError:
        return value == "None"


def to_settings(parsed) -> tuple[LMSettings, Path, bool, bool, bool, bool]:
    """(settings, out, overwrite, resume, quiet, skip_analysis) from tyro's result; UsageError (one line, in the
    recipe's flags) for sizes that cannot work."""
    def choice_of(kind, value):
        entry = entry_of(kind, type(value).__name__)
        return Choice(entry.name, entry.options(**{f.name: getattr(value, f.name)
                                                   for f in dataclasses.fields(entry.options)}))
    task = choice_of("task", parsed.task)
    seq, state = choice_of("seq_mixer", parsed.model.seq_mixer), choice_of("state_mixer", parsed.model.state_mixer)
    m, tr, pairs = parsed.model, parsed.train, parsed.pairs
    flag_to_field = {flag: name for name, flag in TRAIN_FLAGS.items()}
    train = LMTrain(**{flag_to_field.get(f.name, f.name): getattr(tr, f.name)
                       for f in dataclasses.fields(RecipeTrain)})
    settings = lm_settings(task, seq, state, width=m.width, n_layer=m.n_layer, n_head=m.n_head,
                           train=train, pairs=pairs, dense_layout=m.dense_layout,
                           seq_mixers=hybrid_mixers(m.seq_mixers, seq), block=m.block,
                           positions_for=m.positions_for, embed_dropout=m.embed_dropout,
                           tie_embeddings=m.tie_embeddings)
    return settings, Path(parsed.out), parsed.overwrite, parsed.resume, parsed.quiet, parsed.skip_analysis


def hybrid_mixers(text: str, chosen: Choice) -> tuple[Choice, ...]:
    """--model.seq_mixers 'base_conv,based' (see mixer_stack)."""
    return mixer_stack(text, ",", "--model.seq_mixers", chosen)


def lm_settings(task: Choice, seq_mixer: Choice, state_mixer: Choice, *, width: int, n_layer: int,
                n_head: int, train: LMTrain = LMTrain(), pairs: PairShape = PairShape(),
                dense_layout: str = "flat", seq_mixers: tuple[Choice, ...] = (), block: str = "ours",
                positions_for: str = "all", embed_dropout: float = 0.0, tie_embeddings: bool = False) -> LMSettings:
    """The recipe's settings (src.systems.lm.lm_settings), validated: a UsageError, one line, in
    the recipe's flags. The block (`zoology`) is applied last, over the three model fields before it."""
    if block not in BLOCKS:
        raise UsageError(f"--model.block={block!r} is not accepted; accepted: {', '.join(BLOCKS)}")
    settings = lm_settings_unchecked(task, seq_mixer, state_mixer, width=width, n_layer=n_layer, n_head=n_head,
                                     train=train, pairs=pairs, dense_layout=dense_layout, seq_mixers=seq_mixers)
    model = replace(settings.model, positions_for=positions_for, embed_dropout=embed_dropout,
                    tie_embeddings=tie_embeddings)
    return validated(replace(settings, model=with_block(model, block)), FLAGS)


# our settings -> the recipe's flags, for messages
FLAGS = {"task.options.": "--task.", "task": "task", "model.seq_mixer.options.": "--model.seq_mixer.",
         "model.width": "--model.width", "model.dense_layout": "--model.dense_layout",
         "model.seq_mixers": "--model.seq_mixers", "model.positions_for": "--model.positions_for",
         "model.embed_dropout": "--model.embed_dropout", "model.tie_embeddings": "--model.tie_embeddings",
         "model.n_layer": "--model.n_layer", "model.n_head": "--model.n_head",
         "train.steps": "--train.train_steps", "train.": "--train.", "pairs.": "--pairs."}


def parse(argv: Sequence[str]) -> tuple[LMSettings, Path, bool, bool, bool, bool, list[str]]:
    import tyro
    root, variants = build_cli_types()
    kept, notes = check_argv(translate(argv), variants)
    cli = lambda args: one_line_tyro(lambda: tyro.cli(root, args=args, prog=PROG, use_underscores=True,
                                                      config=(tyro.conf.CascadeSubcommandArgs,)))
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
    words = [type(parsed.task).__name__, stack_word(stack) if stack else type(parsed.model.seq_mixer).__name__,
             type(parsed.model.state_mixer).__name__]
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
    print(f"wandb choices: {', '.join(f'wandb:{n}' for n in WANDB_CHOICES)} (on: an offline wandb run in "
          f"the run directory, besides metrics.jsonl)")


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
    return train_command(PROG, settings, out, runner="runners.recipe", argv=argv, overwrite=overwrite,
                         resume=resume, quiet=quiet, wandb=wandb, analyses=() if skip_analysis else None)
