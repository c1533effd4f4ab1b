"""The length study's configuration files as they are in its repository (Lin et al., AAAI 2025:
IKMLab/length-generalization-with-icl, configs/): `!include` composition and its layout, read
into the mechanisms paper's YAML schema that src/cli/gpt2.py turns into settings.

    configs/tasks/<task>/<encoding>.yaml
        model:    !include ../../base_model/llama/standard.yaml     (src/cli/backbones.py)
        patch:    !include ../../patch/alibi/alibi.yaml             {name, rope_scaling: {type}}
        task:     {data, name, curriculum: !include ../../hyperparams/curriculum/dim-50_pts-200.yaml}
        training: !include ../../hyperparams/training_args.yaml     (Hugging Face TrainingArguments)
        wandb:    !include ../../logging/wandb.yaml

`!include PATH` is resolved relative to the file that holds it, nested up to 32 files deep, with a
safe loader (no tag constructs objects; `!!python/...` is refused). A cycle, a missing file and a key we
cannot honour are refused in one line naming the key or the file. Training follows the study's
own loop (TRAINING below), not the Trainer its keys are named after.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from src.flags import UsageError, read_user_file

# the study's names -> ours (one table)
TASKS = {"cnf": "cnf3", "dnf": "dnf3", "sparse_thres": "sparse_threshold"}
ENCODINGS = {"dynamic-yarn": "dynamic_yarn"}     # patch rope_scaling.type -> our position name
# The training block is Hugging Face TrainingArguments' names, but the study's train.py reads six
# of them and builds its own loop: torch's AdamW at its defaults (weight decay 0.01, β 0.9/0.999,
# ε 1e-8), a linear warm-up over warmup_ratio · max_steps then linear decay to 0, no gradient
# clipping. Onto the mechanisms schema's training keys:
TRAINING = {"max_steps": "train_steps", "learning_rate": "learning_rate",
            "per_device_train_batch_size": "batch_size", "warmup_ratio": "warmup_fraction",
            "save_steps": "save_every_steps",
            # Its train.py evaluates held-out prompts only after training (1,280 of them); ours
            # evaluates eval_size (1,000) at every log point, and takes that cadence from
            # eval_steps, Hugging Face's name for it (100 in its configs), and eval_size as ours.
            "eval_steps": "log_every", "eval_size": "eval_size"}
# logging_steps: its train.py logs the training batch's loss every logging_steps steps; ours
# records every step's (training_log.csv), so the key sets the log points only where a config has
# no eval_steps (at 10, an evaluation of 1,000 prompts of 201 points, about 40 s on 2 cores at the
# laptop size, would follow every 25 s of training)
LOGGING = "logging_steps"
# what its loop does besides: the same here
ITS_LOOP = {"weight_decay": 0.01, "grad_clip": 0.0}
# the keys its train.py never reads (they describe a Hugging Face Trainer it does not build):
# accepted, without effect there and here
UNREAD = {"evaluation_strategy", "eval_strategy", "gradient_accumulation_steps", "eval_gradient_accumulation_steps",
          "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm", "save_strategy",
          "save_total_limit", "metric_for_best_model", "per_device_eval_batch_size",
          "output_dir", "report_to", "load_best_model_at_end", "logging_strategy", "seed"}
TOP = {"model", "patch", "task", "training", "wandb", "out_dir"}


# Budgets of `!include` composition: a config is a few files of a few hundred values; these stop a
# hostile or mistaken graph (a file included twice at every one of 30 levels expands to 2^30
# copies) long before it costs memory or time.
MAX_INCLUDE_DEPTH = 32          # files in one chain of includes
MAX_FILES = 256                 # distinct files
MAX_VALUES = 200_000            # values of the whole composed config
MAX_NESTING = 100               # levels of mappings and lists in the composed config


class _Include:
    """An `!include` read but not yet resolved: the path as written, and the file holding it."""

    def __init__(self, target: str, holder: Path):
        self.target, self.holder = target, holder


def load(path: str | Path) -> Any:
    """The YAML file at `path` with every `!include` resolved (UsageError, one line): each file is
    read once however often it is included, and the composition is refused, naming the file, when
    it loops, nests deeper than MAX_INCLUDE_DEPTH files, or would expand beyond MAX_VALUES values,
    MAX_NESTING levels or MAX_FILES files. Only regular files are read (a FIFO, device or
    directory is refused without being opened for long)."""
    from src.provenance import checkout_path
    composer = _Composer()
    root = composer.resolve(checkout_path(path), None)
    size, depth = composer.measure(root, ())
    if size > MAX_VALUES:
        raise UsageError(f"config {path}: its !includes expand to {size:,} values; accepted: at most "
                         f"{MAX_VALUES:,} (is a file included many times over?)")
    if depth > MAX_NESTING:
        raise UsageError(f"config {path}: nests more than {MAX_NESTING} levels deep (with its !includes); "
                         f"accepted: at most {MAX_NESTING}")
    return composer.expand(composer.parsed[root])


class _Composer:
    """Reads each file of an include graph once (`parsed`: resolved path -> its YAML with
    `_Include` leaves), measures the composition before building it, then builds it."""

    def __init__(self):
        self.parsed: dict[Path, Any] = {}
        self.measured: dict[Path, tuple[int, int]] = {}

    def resolve(self, path: Path, include: _Include | None) -> Path:
        """The resolved path of a file of the graph, read and parsed once."""
        where = f" (included by {include.holder})" if include is not None else ""
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError) as err:          # Python 3.11: RuntimeError for a symlink loop
            raise UsageError(f"config {path}: cannot be resolved ({err}){where}") from None
        if resolved in self.parsed:
            return resolved
        if len(self.parsed) >= MAX_FILES:
            raise UsageError(f"config {path}: the !includes name more than {MAX_FILES} files{where}")
        try:
            text = read_user_file(path, "config" if include is None else "!include", "a YAML config")
        except UsageError as err:
            raise UsageError(f"{err}{where}") from None
        self.parsed[resolved] = self._parse(text, path, resolved)
        return resolved

    @staticmethod
    def _parse(text: str, path: Path, resolved: Path) -> Any:
        import yaml

        class Loader(yaml.SafeLoader):
            """A safe loader whose `!include` is left as an `_Include` to resolve after parsing."""
        Loader.add_constructor("!include", lambda loader, node: _Include(loader.construct_scalar(node), resolved))
        try:
            return yaml.load(text, Loader=Loader)     # noqa: S506 - a SafeLoader subclass
        except yaml.YAMLError as err:
            raise UsageError(f"config {path}: not valid YAML ({' '.join(str(err).split())[:300]})") from None
        except RecursionError:
            raise UsageError(f"config {path}: nests too deeply to read; accepted: at most {MAX_NESTING} "
                             "levels") from None

    def target(self, include: _Include) -> Path:
        named = Path(str(include.target))
        return self.resolve(named if named.is_absolute() else include.holder.parent / named, include)

    def measure(self, file: Path, chain: tuple[Path, ...]) -> tuple[int, int]:
        """(values, nesting levels) of a file once its includes are expanded; refuses a cycle and
        a chain of more than MAX_INCLUDE_DEPTH files, and stops counting past the budgets."""
        if file in chain:
            cycle = " -> ".join(str(p) for p in (*chain[chain.index(file):], file))
            raise UsageError(f"!include cycle: {cycle}")
        if file not in self.measured:
            self.measured[file] = self._measure(self.parsed[file], (*chain, file), 0)
        size, depth, files = self.measured[file]
        if len(chain) + files > MAX_INCLUDE_DEPTH:
            raise UsageError(f"config {chain[0] if chain else file}: !includes nest more than "
                             f"{MAX_INCLUDE_DEPTH} files deep (through {file}); accepted: at most "
                             f"{MAX_INCLUDE_DEPTH}")
        return size, depth

    def _measure(self, node: Any, chain: tuple[Path, ...], level: int) -> tuple[int, int, int]:
        """(values, nesting levels, files in the longest include chain) below `node`."""
        if level > MAX_NESTING:
            return 1, level, 1
        if isinstance(node, _Include):
            file = self.target(node)
            size, depth = self.measure(file, chain)
            return size, level + depth, 1 + self.measured[file][2]
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        size, depth, files = 1, level, 1
        for child in children:
            child_size, child_depth, child_files = self._measure(child, chain, level + 1)
            size = min(size + child_size, MAX_VALUES + 1)
            depth, files = max(depth, child_depth), max(files, child_files)
        return size, depth, files

    def expand(self, node: Any) -> Any:
        """A fresh copy of a parsed file with every include replaced by its file's expansion."""
        if isinstance(node, _Include):
            return self.expand(self.parsed[self.target(node)])
        if isinstance(node, dict):
            return {key: self.expand(value) for key, value in node.items()}
        if isinstance(node, list):
            return [self.expand(value) for value in node]
        return node


def is_length_study(raw: Any) -> bool:
    """Whether a config mapping is in the length study's layout (top-level task or patch)."""
    return isinstance(raw, dict) and ("task" in raw or "patch" in raw)


def mapping_of(key: str, value) -> dict:
    """A config block as a dict (None: empty); UsageError naming `key` otherwise."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"{key}={value!r} is not accepted; accepted: a mapping")
    return dict(value)


def refuse_unknown(where: str, raw: dict, known) -> None:
    """UsageError naming the first key of `raw` not in `known`."""
    extra = sorted(set(raw) - set(known))
    if extra:
        raise UsageError(f"{where}{extra[0]}: unknown key; accepted: {', '.join(sorted(known))}")


def to_mechanisms_schema(raw: dict) -> dict:
    """The mechanisms paper's schema (model, training, out_dir, wandb) of a length-study config."""
    refuse_unknown("", raw, TOP)
    model = mapping_of("model", raw.get("model"))
    patch = mapping_of("patch", raw.get("patch"))
    refuse_unknown("patch.", patch, {"name", "rope_scaling"})
    scaling = mapping_of("patch.rope_scaling", patch.get("rope_scaling"))
    refuse_unknown("patch.rope_scaling.", scaling, {"type", "factor"})
    if "type" in scaling and model.get("family") != "Mamba":
        model["position"] = ENCODINGS.get(scaling["type"], scaling["type"])
    task = mapping_of("task", raw.get("task"))
    refuse_unknown("task.", task, {"data", "name", "curriculum"})
    training = {}
    if "name" in task:
        training["task"] = TASKS.get(task["name"], task["name"])
    if task.get("data") not in (None, "boolean"):           # boolean tasks read ±1 inputs by definition
        training["data"] = task["data"]
    curriculum = mapping_of("task.curriculum", task.get("curriculum"))
    refuse_unknown("task.curriculum.", curriculum, {"dims", "points"})
    training["curriculum"] = {}
    for axis, schedule in curriculum.items():
        schedule = mapping_of(f"task.curriculum.{axis}", schedule)
        refuse_unknown(f"task.curriculum.{axis}.", schedule, {"start", "end", "increment", "interval"})
        training["curriculum"][axis] = {("inc" if k == "increment" else k): v for k, v in schedule.items()}
    args = mapping_of("training", raw.get("training"))
    refuse_unknown("training.", args, set(TRAINING) | UNREAD | {LOGGING})
    training.update(ITS_LOOP)
    if LOGGING in args and "eval_steps" not in args:
        training["log_every"] = args[LOGGING]
    training.update({TRAINING[k]: v for k, v in args.items() if k in TRAINING})
    out = {"model": model, "training": training}
    for key in ("out_dir", "wandb"):
        if key in raw:
            out[key] = raw[key]
    return out
