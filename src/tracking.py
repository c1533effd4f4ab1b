"""Optional experiment tracking with Weights & Biases (an optional extra: `pip install wandb`).

The originals log to wandb: the length study's `wandb:` config block (project, entity, mode) and
the ICL benchmark's `wandb:on`. Here the run directory's metrics.jsonl is the record; a wandb
block or `wandb:on` also logs every metrics row to a wandb run inside the run directory
(`<run>/wandb/`), offline unless the block says `mode: online`, for `wandb sync` later.
`mode: disabled` is silent; without wandb installed, one line says how to install it and the
run goes on. Tracking never changes a run's settings or numbers.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from src.settings import SettingsError

MODES = ("offline", "online", "disabled")
KEYS = ("project", "entity", "mode", "name", "group", "tags", "notes")
DEFAULT_PROJECT = "icl-workbench"


@dataclass(frozen=True)
class WandbSpec:
    """What a config's wandb block asks for (validated before any work)."""

    mode: str = "offline"
    project: str = DEFAULT_PROJECT
    entity: str | None = None
    name: str | None = None
    group: str | None = None
    tags: tuple[str, ...] = ()
    notes: str | None = None


def wandb_spec(raw: Any, where: str = "wandb") -> WandbSpec | None:
    """The spec of a config's wandb block (None/absent: no tracking); SettingsError naming the key."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise SettingsError(f"{where}={raw!r} is not accepted; accepted: a mapping with {', '.join(KEYS)}")
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise SettingsError(f"{where}.{unknown[0]}: unknown key; accepted: {', '.join(KEYS)}")
    mode = raw.get("mode") or "offline"
    if mode not in MODES:
        raise SettingsError(f"{where}.mode={mode!r} is not accepted; accepted: {', '.join(MODES)}")
    for key in ("project", "entity", "name", "group", "notes"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise SettingsError(f"{where}.{key}={raw[key]!r} is not accepted; accepted: a string")
    tags = raw.get("tags") or ()
    if isinstance(tags, str) or not all(isinstance(t, str) for t in tags):
        raise SettingsError(f"{where}.tags={tags!r} is not accepted; accepted: a list of strings")
    return WandbSpec(
        mode=mode,
        project=raw.get("project") or DEFAULT_PROJECT,
        entity=raw.get("entity"),
        name=raw.get("name"),
        group=raw.get("group"),
        tags=tuple(tags),
        notes=raw.get("notes"),
    )


class WandbTracker:
    """Logs each metrics row (its numbers, at its step) to an open wandb run."""

    def __init__(self, run, unit: str):
        self.run, self.unit = run, unit

    def log(self, row: Mapping[str, Any]) -> None:
        numbers = {
            k: v for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and k != self.unit
        }
        self.run.log(numbers, step=int(row[self.unit]) if self.unit in row else None)

    def finish(self) -> None:
        self.run.finish()


def start(
    spec: WandbSpec | None, run_dir: Path, config: Mapping[str, Any], name: str, unit: str
) -> WandbTracker | None:
    """An open tracker for `spec`, or None: no spec, mode disabled, or wandb not installed (one
    line on stderr; the run goes on)."""
    if spec is None or spec.mode == "disabled":
        return None
    try:
        import wandb
    except ImportError:
        print(
            "wandb is not installed, so this run logs to metrics.jsonl only; for wandb: "
            "pip install wandb (the optional extra)",
            file=sys.stderr,
        )
        return None
    os.environ.setdefault("WANDB_SILENT", "true")
    run = wandb.init(
        mode=spec.mode,
        dir=str(run_dir),
        project=spec.project,
        entity=spec.entity,
        name=spec.name or name,
        group=spec.group,
        tags=list(spec.tags) or None,
        notes=spec.notes,
        config=dict(config),
    )
    return WandbTracker(run, unit)
