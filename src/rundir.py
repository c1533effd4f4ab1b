"""The run directory: the one contract between training, analyses, sweeps and plots (SPEC §8).

Only this module knows file names. Everything is written atomically; nothing is
pickled (parameters are `params.npz`, float arrays keyed `module/param`).

runs/<exp>/
  config.json            every resolved setting, the command, versions, git commit
  metrics.jsonl          one row per log step
  metrics_summary.json   final numbers (present <=> training finished)
  params.npz             parameters
  ordering_idx.npy       [E, N] eval permutation      (mirrored in analysis/)
  noise_mask.npy         [E, N] eval corruption mask  (mirrored in analysis/)
  analysis/              analysis_metadata.json, alignment.json, ood.csv,
                         attention_stats.json|png
  attn/                  layer{L}_head{H}.npy [tasks, queries, keys], attention.npz
  figs/                  quick attention heatmaps
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from src.config import Settings
from src.provenance import ROOT
from src.params import flatten_params, unflatten_params
from utils_log import (TMP_SUFFIX, JsonlLogger, atomic_save_npy, atomic_save_npz, atomic_write_bytes,
                       atomic_write_json, atomic_write_text, read_jsonl)

CONFIG = "config.json"
METRICS = "metrics.jsonl"
SUMMARY = "metrics_summary.json"
PARAMS = "params.npz"
ORDERING = "ordering_idx.npy"
NOISE_MASK = "noise_mask.npy"
ANALYSIS = "analysis"
METADATA = f"{ANALYSIS}/analysis_metadata.json"
ALIGNMENT = f"{ANALYSIS}/alignment.json"
OOD = f"{ANALYSIS}/ood.csv"
ATTENTION_STATS = f"{ANALYSIS}/attention_stats.json"
ATTENTION_STATS_PNG = f"{ANALYSIS}/attention_stats.png"
ATTN = "attn"
ATTN_RAW = f"{ATTN}/attention.npz"
FIGS = "figs"
DYNAMICS = "dynamics.npz"                       # training-dynamics runs (runners.linattn)
DYNAMICS_JSON = f"{ANALYSIS}/dynamics.json"
DYNAMICS_PNG = f"{ANALYSIS}/dynamics.png"
LOSS_PNG = f"{FIGS}/loss.png"
ICL_CURVE_CSV = f"{ANALYSIS}/icl_curve.csv"     # gpt2-family runs (runners.train)
ICL_CURVE_PNG = f"{ANALYSIS}/icl_curve.png"
ROBUSTNESS = f"{ANALYSIS}/robustness.json"
LENGTH_GEN_CSV = f"{ANALYSIS}/length_gen.csv"   # python -m analysis.length_gen (seed 002)
LENGTH_GEN_JSON = f"{ANALYSIS}/length_gen.json"
LENGTH_GEN_PNG = f"{ANALYSIS}/ood_length.png"
RECENCY_CSV = f"{ANALYSIS}/recency.csv"         # python -m analysis.recency (seed 002)
RECENCY_JSON = f"{ANALYSIS}/recency.json"
RECENCY_PNG = f"{ANALYSIS}/avg_attention_score.png"
PROMPT_TESTS_JSON = f"{ANALYSIS}/prompt_tests.json"   # python -m analysis.prompt_tests (seed 002)
DUPLICATION_PNG = f"{ANALYSIS}/duplication.png"
SERIAL_POSITION_PNG = f"{ANALYSIS}/lost_in_mid.png"
CHECKPOINT = "checkpoint.npz"
TRAINING_LOG = "training_log.csv"
# Written first into every run directory this code creates; with a readable config.json it is
# the proof `RunDir.create(..., overwrite=True)` needs before it deletes anything.
MARKER = ".icl_run"
MARKER_TEXT = "run directory of the in-context learning workbench (src/rundir.py)\n"
STAGING = ".staging-"     # .<name>.staging-<pid>: a replacement being trained
REPLACED = ".replaced-"   # .<name>.replaced-<pid>: the old run during the swap

ATTENTION_TASKS = 1000  # eval tasks whose attention is saved with --save_attention


class RunContext(NamedTuple):
    """What an analysis' `applies` predicate is asked about a finished run."""
    settings: Any          # the run's settings tree
    with_attention: bool   # attention weights were saved (attn/)


class RunDirError(Exception):
    """A run directory problem with a one-line, user-facing message."""


class RunExists(RunDirError):
    pass


class MissingArtifact(RunDirError):
    pass


class CorruptArtifact(RunDirError):
    """A file of a run directory exists but is not what this code wrote (truncated, foreign,
    wrong types or shapes, object arrays)."""


def attention_file(layer: int, head: int) -> str:
    return f"{ATTN}/layer{layer}_head{head}.npy"


def attention_figure(layer: int, head: int) -> str:
    """The quick heatmap of one layer/head (plots.attention_quick)."""
    return f"{FIGS}/attention_layer{layer}_head{head}.png"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _pid_of(name: str, tag: str) -> int | None:
    try:
        return int(name.rsplit(tag, 1)[1])
    except (IndexError, ValueError):
        return None


def remove_stale_siblings(path: Path) -> list[Path]:
    """Remove what a killed process left beside or in the run directory `path`: staging and
    swap directories of dead processes (only those with our marker) and atomic-write
    temporaries (`.<file>.<pid>.<random>.tmp`) of dead processes. Returns what was removed."""
    removed = []
    parent = path.parent
    if parent.is_dir():
        for tag in (STAGING, REPLACED):
            for candidate in parent.glob(f".{glob_escape(path.name)}{tag}*"):
                pid = _pid_of(candidate.name, tag)
                if (pid is not None and not _alive(pid) and not candidate.is_symlink()
                        and (candidate / MARKER).is_file()):
                    shutil.rmtree(candidate)
                    removed.append(candidate)
    for folder in (path, parent):
        if folder.is_dir() and not folder.is_symlink():
            removed += remove_dead_temporaries(folder)
    return removed


def remove_dead_temporaries(folder: Path) -> list[Path]:
    """Atomic-write temporaries in `folder` whose writer process is gone."""
    removed = []
    for tmp in folder.glob(f".*{TMP_SUFFIX}"):
        parts = tmp.name.split(".")
        pid = next((int(p) for p in reversed(parts[:-2]) if p.isdigit()), None)
        if pid is not None and tmp.is_file() and not tmp.is_symlink() and not _alive(pid):
            tmp.unlink()
            removed.append(tmp)
    return removed


def glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def install_archive(path: Path, archive: bytes) -> bool:
    """Put a run directory made elsewhere (a .tar.gz of it, e.g. from a Ray worker) at `path`:
    unpacked into a staging sibling (tarfile's "data" filter: no absolute paths, no links out,
    no devices), then swapped in like `RunDir.commit`. It must carry our marker. An unfinished
    run (no summary) never replaces an existing one. Returns whether it was installed."""
    import io
    import tarfile
    path = Path(path)
    remove_stale_siblings(path)
    run = RunDir(fresh_staging(path))
    run.target = path
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            tar.extractall(run.path, filter="data")
        if not run.exists(MARKER):
            raise RunDirError(f"the run sent back for {path} has no {MARKER} marker; not installed")
        if will_replace(path):
            if not run.exists(SUMMARY):
                run.discard()
                return False
            if not RunDir(path).is_ours():
                raise RunExists(f"--out {path} is not a run directory made by this code; nothing "
                                "was replaced")
        run.commit()
        return True
    except BaseException:
        run.discard()
        raise


def fresh_staging(path: Path) -> Path:
    """An empty `.<name>.staging-<pid>` beside `path` (this process's own leftover removed)."""
    staging = path.parent / f".{path.name}{STAGING}{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    return staging


def unsafe_target(path: Path) -> str | None:
    """Why `path` may never be a run directory (the working directory, a filesystem root,
    the repository or a parent of it), or None."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):
        return "not a resolvable path"
    if resolved == Path(resolved.anchor):
        return "a filesystem root"
    if resolved == Path.cwd().resolve():
        return "the working directory"
    if resolved == ROOT or resolved in ROOT.parents:
        return "the repository or a folder that contains it"
    return None


def will_replace(path: Path) -> bool:
    """A run into `path` now would replace an existing run (staged; see RunDir.create)."""
    return path.is_dir() and any(path.iterdir())


def interrupted_note(path: Path, replacing: bool) -> str:
    """What an interrupted run leaves behind, in one line."""
    if replacing:
        return f"interrupted: the previous run in {path} is kept unchanged (the new one was discarded)"
    return (f"interrupted: {path} is incomplete (every file in it is whole; no {SUMMARY}); "
            "rerun with --overwrite")


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def file(self, name: str) -> Path:
        return self.path / name

    def exists(self, name: str) -> bool:
        return self.file(name).exists()

    # -- creation ---------------------------------------------------------
    @classmethod
    def create(cls, path: str | Path, overwrite: bool = False) -> "RunDir":
        """A fresh run directory, marked as ours (MARKER). An existing non-empty `path` is
        refused unless `overwrite`, and even then it is replaced only when it is provably a
        run directory this code made (`is_ours`); nothing else is ever deleted.

        A replacement trains into a hidden sibling (`.<name>.staging-<pid>`): the old run stays
        whole until `commit()` swaps the new one in, so a rerun that crashes or is killed keeps
        it. Use `with RunDir.create(...) as run:` to commit on success and discard on failure."""
        run = cls(path)
        cls.check_creatable(run.path, overwrite)
        remove_stale_siblings(run.path)
        if will_replace(run.path):
            run = cls(fresh_staging(run.path))
            run.target = Path(path)
        else:
            run.path.mkdir(parents=True, exist_ok=True)
        atomic_write_text(run.file(MARKER), MARKER_TEXT)
        return run

    target: Path | None = None     # set while a replacement is being written in a staging dir

    def commit(self) -> "RunDir":
        """Move a staged run into place. Over an old run (proved ours by `create` or
        `install_archive`): old -> .<name>.replaced-<pid>, staging -> <name>, then the old one
        is removed; over nothing or an empty directory: a rename."""
        if self.target is None:
            return self
        if will_replace(self.target):
            old = self.target.parent / f".{self.target.name}{REPLACED}{os.getpid()}"
            os.replace(self.target, old)
            os.replace(self.path, self.target)
            shutil.rmtree(old)
        else:
            os.replace(self.path, self.target)   # os.replace takes an empty directory's place
        self.path, self.target = self.target, None
        return self

    def discard(self) -> None:
        """Drop an unfinished staged replacement (the old run is untouched)."""
        if self.target is not None and self.path.is_dir():
            shutil.rmtree(self.path)

    def __enter__(self) -> "RunDir":
        return self

    def __exit__(self, kind, value, trace) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()

    def is_ours(self) -> bool:
        """A directory this module created: its marker file plus a readable config.json
        holding settings. Only such a directory may be deleted (by `create`)."""
        if self.path.is_symlink() or not self.path.is_dir():
            return False
        marker = self.file(MARKER)
        if marker.is_symlink() or not marker.is_file():
            return False
        try:
            config = json.loads(self.file(CONFIG).read_text())
        except (OSError, ValueError):
            return False
        return isinstance(config, dict) and isinstance(config.get("settings"), dict)

    @staticmethod
    def check_creatable(path: str | Path, overwrite: bool) -> None:
        """Raise RunExists now (before any work) if `create` would refuse `path`."""
        p = Path(path)
        refuse = unsafe_target(p)
        if refuse:
            raise RunExists(f"--out {p} is {refuse}; accepted: a new or empty directory, or one "
                            "of our run directories with --overwrite")
        if not p.exists() and not p.is_symlink():
            blocker = next((a for a in p.parents if a.exists() and not a.is_dir()), None)
            if blocker is not None:
                raise RunExists(f"--out {p}: {blocker} is a file, not a directory; accepted: a path "
                                "whose parents are directories")
            return
        if not p.is_dir() or p.is_symlink():
            raise RunExists(f"--out {p} exists and is not a directory; accepted: a new or empty "
                            "directory, or one of our run directories with --overwrite")
        if not any(p.iterdir()):
            return
        if not overwrite:
            raise RunExists(f"--out {p} already exists; pass --overwrite to replace it, "
                            "or choose another --out")
        if not RunDir(p).is_ours():
            raise RunExists(f"--out {p} is not a run directory made by this code (no {MARKER} "
                            f"marker with a readable {CONFIG}); --overwrite replaces only those, "
                            "so nothing was deleted: choose another --out")

    # -- writing ----------------------------------------------------------
    def write_json(self, name: str, obj: Any) -> None:
        atomic_write_json(self.file(name), obj)

    def write_bytes(self, name: str, data: bytes) -> None:
        atomic_write_bytes(self.file(name), data)

    def write_text(self, name: str, text: str) -> None:
        atomic_write_text(self.file(name), text)

    def write_npy(self, name: str, array: np.ndarray) -> None:
        atomic_save_npy(self.file(name), array)

    def write_npz(self, name: str, arrays: dict[str, np.ndarray]) -> None:
        atomic_save_npz(self.file(name), arrays)

    def save_params(self, params) -> None:
        self.write_npz(PARAMS, flatten_params(params))

    def metrics_logger(self) -> JsonlLogger:
        return JsonlLogger(self.file(METRICS))

    def save_eval_metadata(self, ordering_idx: np.ndarray, noise_mask: np.ndarray) -> None:
        for name, array in ((ORDERING, ordering_idx), (NOISE_MASK, noise_mask)):
            self.write_npy(name, array)
            self.write_npy(f"{ANALYSIS}/{name}", array)

    # -- reading ----------------------------------------------------------
    def require(self, name: str) -> Path:
        """The path of `name`, or MissingArtifact naming it and the command that makes it."""
        if not self.path.is_dir():
            raise MissingArtifact(f"{self.path} is not a run directory (no such directory); "
                                  f"create one with: python -m runners.run_concat_inputs_targets "
                                  f"--out {self.path}")
        path = self.file(name)
        if not path.exists():
            raise MissingArtifact(f"{path} is missing; create it with: {self.producer(name)}")
        return path

    def producer(self, name: str) -> str:
        """The command that creates `name` in this run directory."""
        run = self.path
        if name == ALIGNMENT:
            return f"python -m analysis.alignment --run {run}"
        if name == OOD:
            return f"python -m analysis.ood_eval --run {run}"
        if name in (ATTENTION_STATS, ATTENTION_STATS_PNG):
            return f"python -m analysis.attention_stats --run {run}"
        if name.startswith(f"{FIGS}/attention_"):
            return f"python -m plots.attention_quick --run {run}"
        command = f"python -m runners.run_concat_inputs_targets --out {run}"
        if self.file(CONFIG).is_file():
            try:   # the command that made it (read directly: a corrupt config.json must not recurse)
                recorded = json.loads(self.file(CONFIG).read_text()).get("command")
                command = recorded if isinstance(recorded, str) and recorded else command
            except (OSError, ValueError, AttributeError):
                pass
        if name.startswith(ATTN):
            return f"{command} --overwrite --save_attention (retrains the run)"
        return command

    def corrupt(self, name: str, why: str) -> CorruptArtifact:
        return CorruptArtifact(f"{self.file(name)} is unusable ({why}); nothing was changed; "
                               f"recreate it with: {self.producer(name)}")

    def load_json(self, name: str) -> Any:
        try:
            with open(self.require(name)) as handle:
                return json.load(handle)
        except (ValueError, UnicodeDecodeError) as err:
            raise self.corrupt(name, f"not valid JSON: {str(err).splitlines()[0][:120]}") from None

    def load_config(self) -> dict:
        """config.json: a mapping whose "settings" is a mapping (CorruptArtifact otherwise)."""
        config = self.load_json(CONFIG)
        if not isinstance(config, dict) or not isinstance(config.get("settings"), dict):
            raise self.corrupt(CONFIG, 'accepted: a JSON object with a "settings" object')
        return config

    def load_settings(self) -> Settings:
        settings = self.load_config()["settings"]     # CorruptArtifact when unreadable
        try:
            return Settings.from_dict(settings)
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise self.corrupt(CONFIG, f"its settings do not load: {str(err)[:160]}") from None

    def load_arrays(self, name: str) -> dict[str, np.ndarray]:
        """The arrays of an .npz (or the one array of an .npy, key ""): numeric or boolean only,
        never objects (nothing is unpickled); CorruptArtifact naming the file otherwise."""
        path = self.require(name)
        try:
            if name.endswith(".npy"):
                arrays = {"": np.load(path, allow_pickle=False)}
            else:
                with np.load(path, allow_pickle=False) as data:
                    arrays = {k: data[k] for k in data.files}
        except Exception as err:  # noqa: BLE001 - ValueError, OSError, EOFError, BadZipFile, ...
            first = (str(err).splitlines() or [type(err).__name__])[0][:100]
            raise self.corrupt(name, f"not a NumPy file of plain arrays: {first}") from None
        for key, array in arrays.items():
            if not isinstance(array, np.ndarray) or array.dtype.kind not in "biuf":
                raise self.corrupt(name, f"array {key!r} has dtype {getattr(array, 'dtype', '?')}; "
                                   "accepted: numeric arrays")
        return arrays

    def load_npy(self, name: str) -> np.ndarray:
        return self.load_arrays(name)[""]

    def load_params(self, like=None):
        """params.npz as a {module: {name: array}} tree. With `like` (a tree of arrays or shape
        structs, e.g. jax.eval_shape of the model's init), the keys and shapes must match it."""
        flat = self.load_arrays(PARAMS)
        if not flat or any("/" not in key for key in flat):
            raise self.corrupt(PARAMS, "accepted: arrays keyed module/parameter")
        if like is not None:
            expected = {f"{m}/{n}": tuple(v.shape) for m, group in like.items() for n, v in group.items()}
            if set(expected) != set(flat):
                missing = sorted(set(expected) - set(flat)) or sorted(set(flat) - set(expected))
                raise self.corrupt(PARAMS, f"its parameters are not this model's (e.g. {missing[0]})")
            for key, shape in expected.items():
                if tuple(flat[key].shape) != shape:
                    raise self.corrupt(PARAMS, f"{key} has shape {tuple(flat[key].shape)}; this "
                                       f"model's is {shape}")
        return unflatten_params(flat)

    def read_metrics(self) -> list[dict]:
        return read_jsonl(self.require(METRICS))

    def listed_outputs(self) -> list[str] | None:
        """The outputs a finished run of a newer system lists in its summary ("outputs"), or
        None (attention-only runs, whose outputs are fixed below)."""
        try:
            listed = self.load_json(SUMMARY).get("outputs") if self.exists(SUMMARY) else None
        except (RunDirError, ValueError, OSError, AttributeError):
            return None
        return [str(n) for n in listed] if isinstance(listed, list) else None

    def is_trained(self) -> bool:
        """Training finished and its outputs are in place."""
        required = [CONFIG, SUMMARY, PARAMS, METRICS] + (
            [] if self.listed_outputs() is not None else [ORDERING, NOISE_MASK])
        if not all(self.exists(n) for n in required):
            return False
        try:
            return self.load_json(SUMMARY).get("status") == "complete"
        except (ValueError, OSError):
            return False

    # -- completeness (sweeps resume from this) ----------------------------
    def attention_saved(self) -> bool:
        """Whether the run was trained with --save_attention (per its metadata)."""
        try:
            return bool(self.load_json(METADATA).get("attention_saved"))
        except (RunDirError, ValueError, OSError):
            return False

    def expected_outputs(self, with_attention: bool | None = None) -> list[str]:
        """Every file a finished, analysed run has. `with_attention=None` asks the run itself."""
        listed = self.listed_outputs()
        if listed is not None:
            return listed
        if with_attention is None:
            with_attention = self.attention_saved()
        expected = [CONFIG, METRICS, SUMMARY, PARAMS, ORDERING, NOISE_MASK,
                    f"{ANALYSIS}/{ORDERING}", f"{ANALYSIS}/{NOISE_MASK}", METADATA, ALIGNMENT, OOD]
        if with_attention:
            expected += [ATTN_RAW, attention_file(0, 0), ATTENTION_STATS, ATTENTION_STATS_PNG]
        return expected

    def missing_outputs(self, with_attention: bool | None = None) -> list[str]:
        return [n for n in self.expected_outputs(with_attention) if not self.exists(n)]

    def is_diverged(self) -> bool:
        """Training stopped on a non-finite loss (final: retraining the same settings repeats it)."""
        try:
            return self.exists(SUMMARY) and self.load_json(SUMMARY).get("status") == "diverged"
        except (ValueError, OSError):
            return False

    def corrupt_files(self) -> list[CorruptArtifact]:
        """Every present JSON / NumPy output of the run that does not load as this code wrote it."""
        problems = []
        for name in [CONFIG] + [n for n in self.expected_outputs() if n != CONFIG]:
            if not self.exists(name):
                continue
            try:
                if name == CONFIG:
                    self.load_config()
                elif name.endswith(".json"):
                    self.load_json(name)
                elif name.endswith((".npz", ".npy")):
                    self.load_arrays(name)
                elif name == METRICS:
                    self.read_metrics()
            except CorruptArtifact as err:
                problems.append(err)
            except (ValueError, OSError) as err:
                problems.append(self.corrupt(name, str(err).splitlines()[0][:100] if str(err) else "unreadable"))
        return problems

    def is_complete(self, with_attention: bool | None = None) -> bool:
        """Trained, and every analysis output is present (attention ones when it was saved,
        or when `with_attention` asks for them)."""
        return self.is_trained() and not self.missing_outputs(with_attention)


def check_main(argv: list[str] | None = None) -> int:
    """`python -m src.rundir [--figs] RUN [RUN ...]`: exit 1 naming every missing artifact
    (--figs: also the quick attention heatmap of layer 0, head 0)."""
    import sys
    args = list(sys.argv[1:] if argv is None else argv)
    with_figs = "--figs" in args
    runs = [a for a in args if a != "--figs"]
    if not runs or any(a.startswith("-") for a in runs):
        print("usage: python -m src.rundir [--figs] RUN_DIR [RUN_DIR ...]  "
              "(exit 1 naming every missing artifact)", file=sys.stderr)
        return 2
    bad = 0
    for path in runs:
        run = RunDir(path)
        if not run.path.is_dir():
            missing = [f"MISSING {run.path} (no such run directory)"]
        else:
            names = run.missing_outputs()
            if with_figs and run.attention_saved():
                names += [n for n in (attention_figure(0, 0),) if not run.exists(n)]
            missing = [f"MISSING {run.file(n)} (create it with: {run.producer(n)})" for n in names]
            missing += [f"CORRUPT {err}" for err in run.corrupt_files()]
            if not missing and not run.is_trained():
                missing = [f"MISSING {run.file(SUMMARY)} (status is not 'complete')"]
        for line in missing:
            print(line, file=sys.stderr)
        if missing:
            bad += 1
        else:
            print(f"ok {run.path}")
    return 1 if bad else 0


if __name__ == "__main__":
    from src.cli import guarded
    raise SystemExit(guarded(check_main))
