"""The recipe's flags before tyro reads them (src/cli/recipe.py): the training flags (RecipeTrain:
LMTrain's fields, `steps` spelt --train.train_steps), the wandb:<choice> component, and check_argv,
which refuses an unknown component, choice or flag, a flag's value of the wrong type, a pair-shape
flag on a token task and a flag that --model.block zoology sets itself, each in one line.
"""

import dataclasses
from typing import Sequence

from src.flags import UsageError
from src.systems.lm import LMTrain, PairShape
from src.tasks.objectives import objective_of, tasks_for
from src.tracking import WandbSpec

VALUE_WITH_COLON = {"--model.seq_mixers"}  # flags whose value may hold name:option=value (not a component)
# the components a command that names none takes: the original's recipe (src/cli/recipe.py)
DEFAULT_CHOICE = {"task": "mqar", "model.seq_mixer": "attention", "model.state_mixer": "mlp"}

# The recipe's training flags (--train.*): LMTrain's fields, `steps` under the flag name the
# recipe has always used, --train.train_steps.
TRAIN_FLAGS = {"steps": "train_steps"}
RecipeTrain = dataclasses.make_dataclass(
    "RecipeTrain",
    [
        (TRAIN_FLAGS.get(f.name, f.name), f.type, dataclasses.field(default=f.default))
        for f in dataclasses.fields(LMTrain)
    ],
    frozen=True,
)

# the benchmark's wandb:<choice> -> what a run logs besides metrics.jsonl (src/tracking.py)
WANDB_CHOICES = {
    "None": None,
    "off": None,
    "on": WandbSpec(),
    "offline": WandbSpec(),
    "online": WandbSpec(mode="online"),
}


def check_argv(argv: Sequence[str], variants: dict) -> tuple[list[str], list[str]]:
    """(argv for tyro, notes). One-line UsageError for an unknown component, choice or flag."""
    chosen, kept, notes = _read_choices(argv, variants)
    types = _flag_types(chosen, variants)
    _refuse_pair_flags_on_token_task(chosen, kept)
    block_conflict(kept)
    _check_flags(kept, types, chosen)
    return kept, notes


def _read_choices(argv: Sequence[str], variants: dict) -> tuple[dict, list[str], list[str]]:
    """(the chosen component names, argv with the wandb choice taken out, notes)."""
    chosen = dict(DEFAULT_CHOICE)
    picked: dict[str, str] = {}
    kept, notes = [], []
    for previous, token in zip([None, *argv], argv):
        if previous in VALUE_WITH_COLON:  # tyro reads a value with ':' only as --flag=value
            kept[-1] = f"{previous}={token}"
            continue
        if ":" in token and not token.startswith("-"):
            component, _, name = token.partition(":")
            if component == "wandb":
                if name not in WANDB_CHOICES:
                    raise UsageError(f"{token} is unknown; accepted: {', '.join(f'wandb:{n}' for n in WANDB_CHOICES)}")
                notes.append(f"wandb:{name}")
                continue
            _check_choice(token, variants, picked)
            chosen[component] = picked[component] = name
        kept.append(token)
    return chosen, kept, notes


def _check_choice(token: str, variants: dict, picked: dict[str, str]) -> None:
    """UsageError for a COMPONENT:NAME with an unknown component or name, or a component chosen twice."""
    component, _, name = token.partition(":")
    if component not in variants:
        raise UsageError(
            f"{token!r}: unknown component {component!r}; accepted: {', '.join(list(variants) + ['wandb'])}"
        )
    if name not in variants[component]:
        raise UsageError(f"{component}:{name} is unknown; accepted: {', '.join(variants[component])}")
    if component in picked:
        raise UsageError(
            f"{token}: {component} is already chosen ({component}:{picked[component]}); accepted: one {component}:NAME"
        )


def _flag_types(chosen: dict, variants: dict) -> dict:
    """Every flag the chosen components take -> its type (None: a switch of the command)."""
    types = {
        "--out": "str",
        "--help": None,
        "-h": None,
        "--overwrite": None,
        "--quiet": None,
        "--resume": None,
        "--skip_analysis": None,
        "--no_overwrite": None,
        "--no_quiet": None,
        "--no_resume": None,
        "--no_skip_analysis": None,
    }
    types |= {f"--train.{f.name}": f.type for f in dataclasses.fields(RecipeTrain)}
    types |= {f"--pairs.{f.name}": f.type for f in dataclasses.fields(PairShape)}
    types |= {f"--model.{n}": "int" for n in ("width", "n_layer", "n_head")}
    types["--model.dense_layout"] = "str"
    types["--model.seq_mixers"] = "str"
    types |= {
        "--model.block": "str",
        "--model.positions_for": "str",
        "--model.embed_dropout": "float",
        "--model.tie_embeddings": "bool",
        "--model.no_tie_embeddings": "bool",
    }
    for component, name in chosen.items():
        for f in dataclasses.fields(variants[component][name]):
            types[f"--{component}.{f.name}"] = f.type
            if _type_name(f.type) == "bool":
                types[f"--{component}.no_{f.name}"] = f.type
    return types


def _refuse_pair_flags_on_token_task(chosen: dict, kept: Sequence[str]) -> None:
    """UsageError where a --pairs.* flag stands beside a token task (it shapes the pair tasks only)."""
    if objective_of(chosen["task"]).inputs != "tokens":
        return
    pairs = next((t for t in kept if t.startswith("--pairs.")), None)
    if pairs is not None:
        raise UsageError(
            f"{pairs.partition('=')[0]} has no effect on the token task task:{chosen['task']} "
            f"(it shapes the pair tasks: {', '.join(tasks_for('pairs'))}); accepted: the "
            "command without it, or a pair task"
        )


def _check_flags(kept: list[str], types: dict, chosen: dict) -> None:
    """UsageError for a stray word, an unknown flag, a switch given a value or a value of the wrong type."""
    accepted = ", ".join(sorted(t for t in types if t.startswith("--")))
    i = 0
    while i < len(kept):
        token = kept[i]
        i += 1
        if not token.startswith("-"):
            if ":" not in token:
                raise UsageError(
                    f"{token!r} is neither a COMPONENT:NAME choice nor the value of a flag; "
                    f"accepted: choices such as task:mqar, and {accepted}"
                )
            continue
        flag, has_value, value = token.partition("=")
        if flag not in types:
            raise UsageError(
                f"{flag} is not an option of {' '.join(f'{c}:{n}' for c, n in chosen.items())}; accepted: {accepted}"
            )
        kind = _type_name(types[flag])
        if kind in (None, "bool"):
            if has_value:
                raise UsageError(f"{token!r}: {flag} is a switch and takes no value; accepted: {flag} alone")
            continue
        if kind == "ints" and not has_value:  # a tuple: the integers that follow
            i = _skip_ints(kept, i, flag)
            continue
        if not has_value:
            if i >= len(kept) or kept[i].startswith("--"):
                raise UsageError(f"{flag} needs a value; accepted: {flag} <{kind}>")
            value, i = kept[i], i + 1
        if not _parses(value, kind):
            raise UsageError(
                f"{flag}={value!r} is not a{'n' if kind == 'int' else ''} {kind}; accepted: {flag} <{kind}>"
            )


def _skip_ints(kept: list[str], i: int, flag: str) -> int:
    """The index after the integers that follow a tuple flag at kept[i - 1]; UsageError for one that is not."""
    while i < len(kept) and not kept[i].startswith("--") and ":" not in kept[i]:
        if not _parses(kept[i], "int"):
            raise UsageError(f"{flag} {kept[i]!r} is not an int; accepted: {flag} <int> [<int> ...]")
        i += 1
    return i


# what --model.block zoology sets itself: a token naming one of these beside it is refused
BLOCK_SETS = (
    "model.state_mixer:",
    "--model.positions_for",
    "--model.embed_dropout",
    "--model.tie_embeddings",
    "--model.no_tie_embeddings",
    "--model.seq_mixer.dropout",
    "--model.seq_mixer.bias",
    "--model.seq_mixer.no_bias",
)


def block_conflict(kept: Sequence[str]) -> None:
    """UsageError (one line) where --model.block zoology stands beside a flag or choice it sets."""
    values = [v for flag, v in zip(kept, kept[1:] + [""]) if flag == "--model.block"]
    values += [t.partition("=")[2] for t in kept if t.startswith("--model.block=")]
    if "zoology" not in values:
        return
    clash = next(
        (t for t in kept if t.startswith(BLOCK_SETS) and (t.startswith("model.") or t.partition("=")[0] in BLOCK_SETS)),
        None,
    )
    if clash is not None:
        raise UsageError(
            f"{clash.partition('=')[0]} beside --model.block zoology: the block sets it (layer norm, "
            "state mixer identity, positions for attention only, dropout 0.1, attention biases, "
            "tied embeddings); accepted: one or the other"
        )


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
