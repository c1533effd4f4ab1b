"""The YAML config format of limits_of_icl ("Not All Attention Is Created Equal", on Garg et al.
2022), read with a safe loader (no object construction from the file) into the settings of system
`gpt2` (src/systems/gpt2.py): what `python -m runners.train --config FILE.yaml` (src/cli/gpt2.py)
and the studies that take the original's configs (mechanisms, lengthgen, linear_attention, ...)
read. A file format, not a command line: nothing here parses flags.

    model:    family (gpt2 | nanogpt | lstm: Garg et al.'s recurrent model, n_dims, n_embd, n_layer,
              n_positions only), n_dims, n_embd, n_head, n_layer, n_positions,
              attention_type (a seq_mixer), attention_kwargs (its options), position, position_kwargs;
              ours: attention_types, a hybrid stack's mixers (a list repeating over the layers; each
              a name at its defaults, attention_type's options where it names that mixer, or
              {name, options});
              or one of the length study's backbones in its base_model keys (Hugging Face's
              names; src/formats/backbones.py): family Llama2 (hidden_size, num_hidden_layers,
              num_attention_heads, hidden_act, rope_theta, max_length, ... and our position,
              position_kwargs) or family Mamba (hidden_size, num_hidden_layers, state_size, ...)
    training: batch_size, learning_rate, train_steps, save_every_steps, keep_every_steps,
              task, task_kwargs, data, num_tasks, num_training_examples, log_every, eval_size, seed,
              curriculum: {dims, points: {start, end, inc, interval}}; ours: the pairs while
              training, ordering / noise_mode / noise_p / noise_sigma / noise_placement (the paper
              system's curricula: e.g. label_noise, 0.25, 0.5, noisy_first)
    out_dir; test_run (true: as in the original, no checkpoints during training — its state.pt
              and model_<i>.pt — every step trained); quick (ours, true: at most 100 steps and a
              small evaluation — a smoke run in seconds)

The YAML keys are a table onto ours (YAML_TO_OURS); every key and value is checked by the
settings, and a refusal names the YAML key (UsageError, one line).
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any, Sequence

from src.flags import UsageError
from src.formats import length_study
from src.formats.length_study import mapping_of, refuse_unknown
from src.formats.backbones import BACKBONES, OURS_TO_BACKBONE, backbone_model, hybrid_mapping
from src.models.sequence_presets import lstm
from src.settings import SettingsError, read_tree
from src.systems.gpt2 import GPT2Settings
from src.tracking import WandbSpec, wandb_spec
from src.yaml_includes import load as load_yaml

FAMILIES = ("gpt2", "nanogpt")  # limits_of_icl names both; they are one model here
RECURRENT = {"lstm": lstm}  # Garg et al.'s recurrent model (src/models/mixers/lstm.py)
RECURRENT_KEYS = {"family", "n_dims", "n_embd", "n_layer", "n_positions", "dense_layout"}
MODEL_KEYS = {
    "family",
    "n_dims",
    "n_embd",
    "n_head",
    "n_layer",
    "n_positions",
    "attention_type",
    "attention_kwargs",
    "position",
    "position_kwargs",
    "dense_layout",
    "attention_kernel",
    "attention_types",
}  # ours: src/models/sequence.py
TRAINING_KEYS = {
    "batch_size",
    "learning_rate",
    "train_steps",
    "save_every_steps",
    "keep_every_steps",
    "task",
    "task_kwargs",
    "data",
    "num_tasks",
    "num_training_examples",
    "curriculum",
    "log_every",
    "eval_size",
    "seed",
    # ours (the length study's Trainer arguments land here: src/formats/length_study.py)
    "grad_clip",
    "warmup_fraction",
    "weight_decay",
    "precision",
    "flat_update",
    # ours: the pairs while training (the paper system's curricula), PAIR_KEYS
    "ordering",
    "noise_mode",
    "noise_p",
    "noise_sigma",
    "noise_placement",
}
PAIR_KEYS = ("ordering", "noise_mode", "noise_p", "noise_sigma", "noise_placement")
TOP_KEYS = {"model", "training", "out_dir", "test_run", "quick", "wandb", "inherit"}
# YAML key -> our settings path (a trailing dot maps every key under it)
YAML_TO_OURS = {
    "model.attention_type": "model.seq_mixer",
    "model.attention_kwargs": "model.seq_mixer.options",
    "model.attention_types": "model.seq_mixers",
    "model.n_embd": "model.width",
    "model.position_kwargs": "model.position.options",
    "training.task": "task",
    "training.task_kwargs": "task.options",
    "training.curriculum.": "curriculum.",
    "training.train_steps": "train.steps",
    "training.save_every_steps": "train.checkpoint_every",
    "training.keep_every_steps": "train.keep_every",
    **{
        f"training.{k}": f"train_curriculum.{k}"
        for k in ("ordering", "noise_mode", "noise_p", "noise_sigma", "noise_placement")
    },
    "training.": "train.",
}
OURS_TO_YAML = {ours: yaml for yaml, ours in YAML_TO_OURS.items()}
QUICK = {"steps": 100, "log_every": 50, "eval_size": 200, "checkpoint_every": 50}  # quick: true caps


def _task(training: dict) -> dict:
    """Our task mapping from the training block's task, task_kwargs and data (popped)."""
    task = {
        "name": training.pop("task", "linear_regression"),
        "options": mapping_of("training.task_kwargs", training.pop("task_kwargs", None)),
    }
    data = training.pop("data", None)
    if data is not None:  # the inputs' distribution of the regression tasks (boolean tasks: ±1)
        from src.tasks.garg import DATA

        if data not in DATA:
            raise UsageError(f"training.data={data!r} is unknown; accepted: {', '.join(DATA)}")
        from src.registry import registry

        options = registry("task").get(task["name"]).options if task["name"] in registry("task") else None
        if options is not None and hasattr(options, "data"):
            task["options"]["data"] = data
    return task


def _train(training: dict, raw: dict) -> dict:
    """Our train mapping from the rest of the training block (quick caps its sizes; test_run
    leaves only the final checkpoint)."""
    renames = {"train_steps": "steps", "save_every_steps": "checkpoint_every", "keep_every_steps": "keep_every"}
    train = {renames.get(k, k): (0 if k == "keep_every_steps" and v is None else v) for k, v in training.items()}
    defaults = GPT2Settings().train
    if raw.get("quick"):
        train.update(
            {
                k: min(train.get(k, getattr(defaults, k)), cap) if isinstance(train.get(k, 0), int) else train[k]
                for k, cap in QUICK.items()
            }
        )
    if raw.get("test_run"):
        steps = train.get("steps", defaults.steps)
        train.update(
            checkpoint_every=steps if isinstance(steps, int) and steps >= 1 else defaults.checkpoint_every, keep_every=0
        )
    return train


def settings_mapping(raw: Any) -> tuple[dict, dict]:
    """(our settings mapping, the YAML's top level) of the original's YAML; UsageError on a key the
    schema does not have."""
    if not isinstance(raw, dict):
        raise UsageError(
            f"the config is a {type(raw).__name__}, not a mapping; accepted: a YAML "
            "mapping with model, training, out_dir"
        )
    refuse_unknown("", raw, TOP_KEYS)
    model, training = mapping_of("model", raw.get("model")), mapping_of("training", raw.get("training"))
    family = _family(model)
    refuse_unknown("training.", training, TRAINING_KEYS)
    for key in ("num_tasks", "num_training_examples"):  # null (the originals' default): fresh every step
        if key in training and training[key] is None:
            training.pop(key)
    curriculum = mapping_of("training.curriculum", training.pop("curriculum", None))
    refuse_unknown("training.curriculum.", curriculum, {"dims", "points"})
    curriculum = {k: mapping_of(f"training.curriculum.{k}", v) for k, v in curriculum.items()}
    dims_end = curriculum.get("dims", {}).get("end", 5)
    points_end = curriculum.get("points", {}).get("end", 11)
    ours = _task_and_training(training, raw, curriculum)
    ours["model"] = _model_mapping(family, model, dims_end, points_end)
    return ours, raw


def _family(model: dict) -> str:
    """model.family (default gpt2), known, with no key its schema does not have."""
    family = model.get("family", "gpt2")
    if family not in FAMILIES and family not in BACKBONES and family not in RECURRENT:
        raise UsageError(
            f"model.family={family!r} is unknown; accepted: {', '.join((*FAMILIES, *RECURRENT, *BACKBONES))}"
        )
    if family in FAMILIES:
        refuse_unknown("model.", model, MODEL_KEYS)
    if family in RECURRENT:
        refuse_unknown("model.", model, RECURRENT_KEYS)
    return family


def _task_and_training(training: dict, raw: dict, curriculum: dict) -> dict:
    """Our task, train, train_curriculum (the pair keys, where given) and curriculum (where given)."""
    pairs = {k: training.pop(k) for k in PAIR_KEYS if k in training}
    ours = {"task": _task(training), "train": _train(training, raw)}
    if pairs:
        ours["train_curriculum"] = pairs
    if curriculum:
        ours["curriculum"] = {k: v for k, v in curriculum.items()}
        ours["curriculum"].setdefault("dims", {"start": 5, "end": 5})
        ours["curriculum"].setdefault("points", {"start": 11, "end": 11})
    return ours


def _model_mapping(family: str, model: dict, dims_end, points_end) -> dict:
    """Our model: a backbone's, a recurrent model's or the GPT-2 family's."""
    if family in BACKBONES:
        return backbone_model(model, dims_end, points_end)
    if family in RECURRENT:
        return _recurrent_model(family, model, dims_end, points_end)
    renames = {"n_embd": "width"}
    ours_model = {
        renames.get(k, k): v
        for k, v in model.items()
        if k in ("n_dims", "n_embd", "n_head", "n_layer", "dense_layout", "attention_kernel")
    }
    ours_model.setdefault("n_dims", dims_end)
    ours_model.update(preset="gpt2", inputs="pairs", max_tokens=2 * _points(model, points_end))
    spelled = model.get("attention_type", "softmax_causal")
    if isinstance(spelled, str) and ":" in spelled:  # our command lines' name:option=value, not this file's
        name, _, options = spelled.partition(":")
        raise UsageError(
            f"model.attention_type={spelled!r} is not accepted; accepted: a mixer's name "
            f"(attention_type: {name}) with its options under model.attention_kwargs "
            f"({', '.join(f'{k}: {v}' for k, _, v in (o.partition('=') for o in options.split(':')))}), or "
            f"the name:option=value spelling as an item of model.attention_types"
        )
    ours_model["seq_mixer"] = {
        "name": spelled,
        "options": mapping_of("model.attention_kwargs", model.get("attention_kwargs")),
    }
    layers = hybrid_mapping(model, ours_model["seq_mixer"])
    if layers is not None:
        ours_model["seq_mixers"] = layers
    ours_model["position"] = {
        "name": model.get("position", "learned"),
        "options": mapping_of("model.position_kwargs", model.get("position_kwargs")),
    }
    return ours_model


def _points(model: dict, points_end) -> int:
    """model.n_positions (default: the points the run trains on), checked: our model.max_tokens
    is two tokens per point."""
    points = model.get("n_positions", points_end)
    if isinstance(points, bool) or not isinstance(points, int) or points < 1:
        raise UsageError(f"model.n_positions={points!r} is not accepted; accepted: an integer >= 1")
    if isinstance(points_end, int) and points < points_end:
        raise UsageError(
            f"model.n_positions={points} is not accepted; accepted: >= "
            f"training.curriculum.points.end={points_end} (the points the run trains on)"
        )
    return points


def _recurrent_model(family: str, model: dict, dims_end, points_end) -> dict:
    """Our model mapping of a recurrent family's block: its preset with the block's sizes."""
    preset = dataclasses.asdict(RECURRENT[family]())
    preset.update(
        {
            ("width" if k == "n_embd" else k): v
            for k, v in model.items()
            if k in ("n_dims", "n_embd", "n_layer", "dense_layout")
        }
    )
    if "n_dims" not in model:
        preset["n_dims"] = dims_end
    preset["max_tokens"] = 2 * _points(model, points_end)
    return preset


def settings_from_config(raw: Any) -> tuple[GPT2Settings, Path | None]:
    """(validated settings, its out_dir or None) of the original's YAML mapping; UsageError in the
    YAML's words."""
    ours, top = settings_mapping(raw)
    try:
        settings = read_tree(GPT2Settings, ours).validate()
    except SettingsError as err:
        family = top.get("model", {}).get("family") if isinstance(top.get("model"), dict) else None
        raise UsageError(err.translate({**OURS_TO_YAML, **(OURS_TO_BACKBONE if family in BACKBONES else {})})) from None
    out_dir = top.get("out_dir")
    if out_dir is not None and (not isinstance(out_dir, str) or not out_dir.strip()):
        raise UsageError(
            f"out_dir={out_dir!r} is not accepted; accepted: a directory path (or no out_dir: "
            "the default run directory)"
        )
    return settings, (Path(out_dir) if out_dir else None)


def apply_sets(raw: dict, assignments: Sequence[str]) -> dict:
    """--set training.learning_rate=3e-4 on the YAML mapping (values parsed as YAML scalars)."""
    import yaml

    for item in assignments:
        path, eq, text = item.partition("=")
        if not eq or not path:
            raise UsageError(f"--set {item!r} is not accepted; accepted: KEY=VALUE, e.g. training.train_steps=500")
        node = raw
        keys = path.split(".")
        for key in keys[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise UsageError(f"--set {item!r}: {key} is not a mapping")
        node[keys[-1]] = yaml.safe_load(text)
    return raw


def read_config(path: str, sets: Sequence[str] = ()) -> tuple[GPT2Settings, Path]:
    """(settings, out_dir) of a YAML config file with `--set` overrides (UsageError, one line):
    the mechanisms paper's schema, or the length study's layout with its `!include`s."""
    settings, out, _ = read_run_config(path, sets)
    return settings, out


def read_run_config(path: str, sets: Sequence[str] = ()) -> tuple[GPT2Settings, Path, WandbSpec | None]:
    """read_config's (settings, out_dir) and the file's wandb block (src/tracking.py)."""
    return read_run_configs(path, sets)[0]


def read_run_configs(path: str, sets: Sequence[str] = ()) -> list[tuple[GPT2Settings, Path, WandbSpec | None]]:
    """(settings, out_dir, wandb block) of each run a config file makes: one, or one per entry of a
    length-study backbone's `max_length` list, as its train.py trains them (out_dir _max_length<L>).
    Every run is validated before the first trains (UsageError, one line)."""
    raw = load_yaml(path)
    if isinstance(raw, dict):
        raw = apply_sets(raw, sets)
    lengths = _max_lengths(raw)
    runs = []
    for length in lengths:
        one = raw
        if len(lengths) > 1:
            one = copy.deepcopy(raw)
            one["model"]["max_length"] = [length]
        if length_study.is_length_study(one):
            one = length_study.to_mechanisms_schema(one)
        settings, out = settings_from_config(one)
        try:
            spec = wandb_spec(one.get("wandb"))
        except SettingsError as err:
            raise UsageError(str(err)) from None
        out = out if out is not None else default_out(path, sets)
        runs.append((settings, out.with_name(f"{out.name}_max_length{length}") if len(lengths) > 1 else out, spec))
    return runs


def _max_lengths(raw: Any) -> list:
    """The entries of model.max_length when it is a list of several (else [None]: one run)."""
    model = raw.get("model") if isinstance(raw, dict) else None
    lengths = model.get("max_length") if isinstance(model, dict) else None
    if isinstance(lengths, list) and len(lengths) > 1:
        if len(set(map(str, lengths))) != len(lengths):
            raise UsageError(f"model.max_length={lengths!r} is not accepted; accepted: distinct lengths (one run each)")
        return lengths
    return [None]


def default_out(path: str, sets: Sequence[str]) -> Path:
    """runs/train/<config name>, the length study's <task>_<encoding> (its files are
    tasks/<task>/<encoding>.yaml), then _<key><value> for each --set: each config and each
    override gets its own run."""
    file = Path(path)
    words = [f"{file.parent.name}_{file.stem}" if file.parent.parent.name == "tasks" else file.stem]
    for item in sets:
        key, _, value = item.partition("=")
        words.append(f"{key.rsplit('.', 1)[-1]}{value}")
    return Path("runs/train") / "_".join(words)
