"""The run directory: creating it (safely, see src/rundir/staging.py), writing its files
atomically and reading them back with one-line errors for anything missing or corrupt (what a
run holds and lacks: src/rundir/completeness.py, a part of RunDir). The file names are
src/rundir/names.py's; only src/pipeline.py and the analyses write here.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from src.files import (
    atomic_save_npy,
    atomic_save_npz,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    loads_json,
    read_json,
    read_jsonl,
)
from src.params import unflatten_params
from src.rundir.completeness import RunCompleteness
from src.rundir.names import CONFIG, MARKER, MARKER_TEXT, METRICS, PARAMS, REPLACED, analysis_module, training_flag
from src.rundir.staging import (
    CorruptArtifact,
    MissingArtifact,
    RunExists,
    WrongSystem,
    code_missing,
    drop_kept,
    fresh_staging,
    keep,
    kept_replacement,
    remove_stale_siblings,
    unsafe_target,
    will_replace,
)


class RunDir(RunCompleteness):
    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    @property
    def name(self) -> str:
        """The run's name: its directory's, or while a replacement is written in a staging folder,
        the name of the run it replaces (so its figures read the same either way)."""
        return (self.target or self.path).name

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

    target: Path | None = None  # set while a replacement is being written in a staging dir

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
            os.replace(self.path, self.target)  # os.replace takes an empty directory's place
        drop_kept(self.target)  # an interrupted replacement this one superseded
        self.path, self.target = self.target, None
        return self

    def discard(self) -> None:
        """Drop an unfinished staged replacement (the old run is untouched)."""
        if self.target is not None and self.path.is_dir():
            shutil.rmtree(self.path)

    def keep(self) -> None:
        """An interrupted replacement with a checkpoint moves to `.<name>.replacement` (staging.keep);
        one without is discarded."""
        if self.target is not None and self.path.is_dir():
            self.path = keep(self.path, self.target) or self.path

    def __enter__(self) -> "RunDir":
        return self

    def __exit__(self, kind, value, trace) -> None:
        if kind is None:
            self.commit()
        elif issubclass(kind, KeyboardInterrupt) or (
            self.target is not None and self.path == kept_replacement(self.target)
        ):
            self.keep()  # stopped, or a resumed replacement that failed: its checkpoint stays
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
            config = loads_json(self.file(CONFIG).read_text())
        except (OSError, ValueError):
            return False
        return isinstance(config, dict) and isinstance(config.get("settings"), dict)

    @staticmethod
    def check_creatable(path: str | Path, overwrite: bool) -> None:
        """Raise RunExists now (before any work) if `create` would refuse `path`."""
        p = Path(path)
        refuse = unsafe_target(p)
        if refuse:
            raise RunExists(
                f"--out {p} is {refuse}; accepted: a new or empty directory, or one "
                "of our run directories with --overwrite"
            )
        if not p.exists() and not p.is_symlink():
            blocker = next((a for a in p.parents if a.exists() and not a.is_dir()), None)
            if blocker is not None:
                raise RunExists(
                    f"--out {p}: {blocker} is a file, not a directory; accepted: a path whose parents are directories"
                )
            return
        if not p.is_dir() or p.is_symlink():
            raise RunExists(
                f"--out {p} exists and is not a directory; accepted: a new or empty "
                "directory, or one of our run directories with --overwrite"
            )
        if not any(p.iterdir()):
            return
        if not overwrite:
            raise RunExists(f"--out {p} already exists; pass --overwrite to replace it, or choose another --out")
        if not RunDir(p).is_ours():
            raise RunExists(
                f"--out {p} is not a run directory made by this code (no {MARKER} "
                f"marker with a readable {CONFIG}); --overwrite replaces only those, "
                "so nothing was deleted: choose another --out"
            )

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

    # -- reading ----------------------------------------------------------
    def require(self, name: str) -> Path:
        """The path of `name`, or MissingArtifact naming it and the command that makes it."""
        if not self.path.is_dir():
            raise MissingArtifact(
                f"{self.path} is not a run directory (no such directory); "
                f"create one with: python -m runners.run_concat_inputs_targets "
                f"--out {self.path}"
            )
        path = self.file(name)
        if not path.exists():
            raise MissingArtifact(f"{path} is missing; create it with: {self.producer(name)}")
        return path

    def producer(self, name: str) -> str:
        """The command that creates `name` in this run directory: its analysis, or the command
        that trained the run (with --overwrite when the directory exists: it retrains)."""
        module = analysis_module(name)
        if module is not None:
            return f"python -m {module} --run {self.path}"
        recorded = None
        if self.file(CONFIG).is_file():
            try:  # the command that made it (read directly: a corrupt config.json must not recurse)
                recorded = loads_json(self.file(CONFIG).read_text()).get("command")
            except (OSError, ValueError, AttributeError):
                pass
        if isinstance(recorded, str) and recorded:
            command, words, flag = recorded, recorded.split(), training_flag(name)
            if flag and flag not in words:
                command += f" {flag}"  # the file is written only with that flag
        else:
            command = f"python -m runners.run --config {self.file(CONFIG)} --out {self.path}"
            words = command.split()
        if self.path.is_dir() and any(self.path.iterdir()):
            command += " (retrains the run)" if "--overwrite" in words else " --overwrite (retrains the run)"
        return command

    def corrupt(self, name: str, why: str) -> CorruptArtifact:
        return CorruptArtifact(
            f"{self.file(name)} is unusable ({why}); nothing was changed; recreate it with: {self.producer(name)}"
        )

    def load_json(self, name: str) -> Any:
        try:
            return read_json(self.require(name))
        except (ValueError, UnicodeDecodeError) as err:
            raise self.corrupt(name, f"not valid JSON: {str(err).splitlines()[0][:120]}") from None

    def load_config(self) -> dict:
        """config.json: a mapping whose "settings" is a mapping (CorruptArtifact otherwise)."""
        config = self.load_json(CONFIG)
        if not isinstance(config, dict) or not isinstance(config.get("settings"), dict):
            raise self.corrupt(CONFIG, 'accepted: a JSON object with a "settings" object')
        return config

    def load_settings(self, *systems: str):
        """The run's Settings, read and validated by its system (src/systems/): CorruptArtifact
        naming config.json and the bad key when they do not load or do not validate (a hostile
        config.json never reaches the work), WrongSystem when `systems` are given and the run's
        is not one of them."""
        from src.bounds import reading_a_run
        from src.settings import SettingsError, UnknownEntry
        from src.systems import SYSTEMS, settings_from_record, system_name

        raw = self.load_config()["settings"]  # CorruptArtifact when unreadable
        name = system_name(raw)
        if name not in SYSTEMS:
            raise self.corrupt(
                CONFIG, f"it names system {name!r}, which is unknown; accepted: {', '.join(SYSTEMS.names())}"
            )
        if systems and name not in systems:
            raise WrongSystem(
                f"{self.path} is a run of system {name!r}; accepted: a run of {' or '.join(map(repr, systems))}"
            )
        try:
            with reading_a_run():  # trained already: its evaluation's memory is checked, not training's
                return settings_from_record(raw)
        except UnknownEntry as err:
            raise code_missing(self.file(CONFIG), err) from None
        except SettingsError as err:
            raise self.corrupt(CONFIG, f"its settings do not load: {err}") from None

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
                raise self.corrupt(
                    name, f"array {key!r} has dtype {getattr(array, 'dtype', '?')}; accepted: numeric arrays"
                )
        return arrays

    def load_npy(self, name: str) -> np.ndarray:
        return self.load_arrays(name)[""]

    def load_params(self, like=None, rename=None):
        """params.npz as a {module: {name: array}} tree (keys read through `rename`, e.g. the
        names of an older version). With `like` (a tree of arrays or shape structs, e.g.
        jax.eval_shape of the model's init), the keys and shapes must match it. Parameters that
        are not finite are refused: nothing computed from them would mean anything."""
        flat = self.load_arrays(PARAMS)
        if rename is not None:
            flat = {rename(key): value for key, value in flat.items()}
        if not flat or any("/" not in key for key in flat):
            raise self.corrupt(PARAMS, "accepted: arrays keyed module/parameter")
        bad = [key for key, value in flat.items() if not np.all(np.isfinite(value))]
        if bad:
            raise self.corrupt(
                PARAMS,
                f"{len(bad)} of {len(flat)} arrays hold non-finite values (e.g. "
                f"{bad[0]}): the run diverged or the file was changed",
            )
        if like is not None:
            expected = {f"{m}/{n}": tuple(v.shape) for m, group in like.items() for n, v in group.items()}
            if set(expected) != set(flat):
                missing = sorted(set(expected) - set(flat)) or sorted(set(flat) - set(expected))
                raise self.corrupt(PARAMS, f"its parameters are not this model's (e.g. {missing[0]})")
            for key, shape in expected.items():
                if tuple(flat[key].shape) != shape:
                    raise self.corrupt(PARAMS, f"{key} has shape {tuple(flat[key].shape)}; this model's is {shape}")
        return unflatten_params(flat)

    def read_metrics(self) -> list[dict]:
        return read_jsonl(self.require(METRICS))
