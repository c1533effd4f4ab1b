"""Creating and replacing run directories safely: what may be a run directory, the staging
sibling a replacement is trained in, the swap, and the clean-up of what a killed process left.
Only directories carrying our marker (and a readable config.json) are ever deleted.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from src.files import TMP_SUFFIX
from src.provenance import ROOT, code_fingerprint
from src.rundir.names import CHECKPOINT, KEPT, MARKER, REPLACED, STAGING, SUMMARY


class RunDirError(Exception):
    """A run directory problem with a one-line, user-facing message."""


class RunExists(RunDirError):
    pass


class MissingArtifact(RunDirError):
    pass


class WrongSystem(RunDirError):
    """A run of another system than the command reads."""


class CodeMissing(RunDirError):
    """A run whose settings name a registry entry this checkout does not have: it was made by
    other code, and neither reading nor retraining it here can help."""


def code_missing(config_file: Path, err) -> CodeMissing:
    """The one-line truth about a run whose config.json names an entry (`err`: UnknownEntry) this
    checkout lacks: which entry, and the code that made the run against this checkout's."""
    try:
        config = json.loads(config_file.read_text())
    except (OSError, ValueError):
        config = {}
    config = config if isinstance(config, dict) else {}
    git = config.get("git") if isinstance(config.get("git"), dict) else {}
    made = [f"code fingerprint {config.get('code_fingerprint') or 'unrecorded'}"]
    if git.get("commit"):
        made.append(f"commit {str(git['commit'])[:12]}" + (" with uncommitted changes" if git.get("dirty") else ""))
    if git.get("untracked"):
        made.append("untracked then: " + ", ".join(map(str, git["untracked"])))
    return CodeMissing(
        f"{config_file} names {err.kind} {err.name!r} ({err.path}), which this checkout does "
        f"not register: the run was made by other code ({'; '.join(made)}; this checkout's "
        f"fingerprint {code_fingerprint()}); check that code out, or add the entry, to read it "
        f"(retraining here cannot help){getattr(err, 'suggestion', '')}; nothing was changed"
    )


class CorruptArtifact(RunDirError):
    """A file of a run directory exists but is not what this code wrote (truncated, foreign,
    wrong types or shapes, object arrays)."""


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
                if (
                    pid is not None
                    and not _alive(pid)
                    and not candidate.is_symlink()
                    and (candidate / MARKER).is_file()
                ):
                    shutil.rmtree(candidate)
                    removed.append(candidate)
    for folder in (path, parent):
        if folder.is_dir() and not folder.is_symlink():
            removed += remove_dead_temporaries(folder)
    return removed


def remove_dead_temporaries(folder: Path, *, own: bool = False) -> list[Path]:
    """Atomic-write temporaries in `folder` whose writer process is gone; with `own`, this
    process's too (a write that an interrupt cut short)."""
    removed = []
    for tmp in folder.glob(f".*{TMP_SUFFIX}"):
        parts = tmp.name.split(".")
        pid = next((int(p) for p in reversed(parts[:-2]) if p.isdigit()), None)
        if pid is None or not tmp.is_file() or tmp.is_symlink():
            continue
        if not _alive(pid) or (own and pid == os.getpid()):
            tmp.unlink()
            removed.append(tmp)
    return removed


def remove_temporaries_below(path: Path, *, own: bool = False) -> list[Path]:
    """`remove_dead_temporaries` in `path` and every folder below it (links not followed)."""
    if not path.is_dir() or path.is_symlink():
        return []
    folders = [path, *(p for p in path.rglob("*") if p.is_dir() and not p.is_symlink())]
    return [tmp for folder in folders for tmp in remove_dead_temporaries(folder, own=own)]


def glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


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


def kept_replacement(path: Path) -> Path:
    """Where an interrupted replacement of run `path` is kept with its checkpoint (`--overwrite
    --resume` continues it there and swaps it in when it finishes)."""
    return path.parent / f".{path.name}{KEPT}"


def _ours(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink() and (path / MARKER).is_file()


def drop_kept(target: Path) -> None:
    """Remove the interrupted replacement kept beside run `target` (a newer one superseded it)."""
    if _ours(kept_replacement(target)):
        shutil.rmtree(kept_replacement(target))


def keep(staging: Path, target: Path) -> Path | None:
    """Move an interrupted replacement of `target` that wrote a checkpoint from `staging` to
    `.<name>.replacement` beside it (the old run untouched), where `--overwrite --resume`
    continues it; discard one without a checkpoint. Returns where it is kept, or None."""
    kept = kept_replacement(target)
    if staging == kept:  # a resumed replacement stays where it is
        return kept
    if not (staging / CHECKPOINT).is_file():
        shutil.rmtree(staging)
        return None
    remove_temporaries_below(staging, own=True)  # a write the interrupt cut short
    drop_kept(target)  # an older interrupted replacement
    os.replace(staging, kept)
    return kept


def will_replace(path: Path) -> bool:
    """A run into `path` now would replace an existing run (staged; see RunDir.create)."""
    return path.is_dir() and any(path.iterdir())


def interrupted_note(path: Path, replacing: bool) -> str:
    """What an interrupted run leaves behind, in one line; --resume is offered only where a
    checkpoint was written."""
    if replacing:
        kept = kept_replacement(path)
        if (kept / CHECKPOINT).is_file():
            return (
                f"interrupted: the previous run in {path} is kept unchanged; the new one is kept with its "
                f"checkpoint in {kept}: continue it with the same command and --overwrite --resume (it "
                "replaces the previous run when it finishes)"
            )
        return (
            f"interrupted: the previous run in {path} is kept unchanged (the new one had no checkpoint yet "
            "and was discarded)"
        )
    note = f"interrupted: {path} is incomplete (every file in it is whole; no {SUMMARY}); rerun with --overwrite"
    if (path / CHECKPOINT).is_file():
        return note + "; or continue it from its checkpoint: the same command with --resume"
    return note + f" (no {CHECKPOINT} was written yet, so --resume has nothing to continue)"
