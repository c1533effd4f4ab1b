"""The grid of a sweep (eval_order / eval_noise): comma lists -> grid points -> jobs.

A grid is the product of comma lists (models x orderings x noise modes x p x sigma x
placements x train/eval overrides x --grid settings x seeds). Every grid point is one run
directory, named deterministically from its settings. A point's Settings are made by the
runners' own rules (src.cli.lsa: settings_for, curriculum_of), as Python values, so the plan
compares exactly what the run will store.
"""

from __future__ import annotations

import argparse
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from src.flags import UsageError, choices_list, comma_items, number_list, seed_list
from src.cli.lsa import CURRICULUM_FIELDS, curriculum_of, settings_for
from src.gd_paper.config import NOISE_MODES, ORDERINGS, PLACEMENTS
from src.jobs.engine import Job, plan
from src.gd_paper.presets import MODEL_PRESETS
from src.systems.lsa import LSASettings

AUTO = "auto"
CLEAN = "clean"
GridError = UsageError  # a bad flag value: one line naming the flag, value and what is accepted


# ---------------------------------------------------------------------------
# Grid points


def fmt_number(x: float) -> str:
    """0.25 -> '0.25', 1.0 -> '1' (exact: repr, not %g)."""
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


@dataclass(frozen=True)
class GridPoint:
    """One run: a model, a seed, the shared curriculum and the explicit train/eval overrides."""

    model: str
    seed: int
    ordering: str
    noise_mode: str
    p: float | None  # None when no phase uses noise
    sigma: float | None  # None = the runner's default
    placement: str | None
    overrides: tuple = ()  # ((flag name without --, value), ...) for non-auto values
    sets: tuple = ()  # ((dotted settings path, value text), ...) from --grid

    def name(self) -> str:
        parts = [self.model, f"ord-{self.ordering}"]
        noise = f"noise-{self.noise_mode}"
        if self.p is not None:
            sigma = 1.0 if self.sigma is None else self.sigma
            noise += f"-p{fmt_number(self.p)}-s{fmt_number(sigma)}-{self.placement}"
        parts.append(noise)
        for flag, value in self.overrides:
            parts.append(f"{flag}-{fmt_number(value) if isinstance(value, float) else value}")
        for path, value in self.sets:
            parts.append(f"{path}-{value}")
        parts.append(f"seed{self.seed}")
        return "__".join(parts)

    def settings(self, training: dict, save_attention: bool) -> LSASettings:
        """The validated settings of this point (UsageError, one line)."""
        shared = {
            "ordering": self.ordering,
            "noise_mode": self.noise_mode,
            "noise_p": self.p,
            "noise_sigma": self.sigma if self.p is not None else None,
            "noise_placement": self.placement if self.p is not None else None,
        }
        given = dict(self.overrides)
        train_c, eval_c = (
            curriculum_of(phase, shared, {f: given.get(f"{phase}_{f}", "auto") for f in CURRICULUM_FIELDS})[0]
            for phase in ("train", "eval")
        )
        spec = MODEL_PRESETS[self.model]
        layers = spec.layers if spec.layers_flag and not spec.fixed_depth else None
        return settings_for(
            self.model,
            num_layers=layers,
            seed=self.seed,
            train_curriculum=train_c,
            eval_curriculum=eval_c,
            save_attention=save_attention,
            sets=[f"{path}={value}" for path, value in self.sets],
            **training,
        )


@dataclass
class Grid:
    points: list[GridPoint]
    training: dict  # training settings every run gets (None: the preset's)
    save_attention: bool


def grid_flags(items: Sequence[str]) -> dict[str, list[str]]:
    """--grid PATH=V1,V2 ... -> {path: [values]} (checked when the runs' settings resolve)."""
    axes: dict[str, list[str]] = {}
    for item in items:
        path, eq, values = item.partition("=")
        if not eq or not path.strip() or path.strip() in axes:
            raise GridError(
                f"--grid={item!r} is not accepted; accepted: PATH=V1,V2 with a dotted "
                "settings path given once, e.g. train.adam_b2=0.98,0.999"
            )
        axes[path.strip()] = comma_items(f"--grid {path.strip()}", values, "values")
    return axes


def phase_overrides(args: argparse.Namespace) -> dict[str, list]:
    """The --train_* and --eval_* lists, by key (`train_ordering`, ...), each checked."""
    overrides = {}
    for phase in ("train", "eval"):
        flag = f"--{phase}_"
        overrides[f"{phase}_ordering"] = choices_list(
            flag + "ordering", getattr(args, f"{phase}_ordering"), ORDERINGS + (AUTO,)
        )
        overrides[f"{phase}_noise_mode"] = choices_list(
            flag + "noise_mode", getattr(args, f"{phase}_noise_mode"), NOISE_MODES + (AUTO,)
        )
        overrides[f"{phase}_noise_p"] = number_list(
            flag + "noise_p", getattr(args, f"{phase}_noise_p"), 0.0, 1.0, "numbers in [0, 1]", allow_auto=True
        )
        overrides[f"{phase}_noise_sigma"] = number_list(
            flag + "noise_sigma",
            getattr(args, f"{phase}_noise_sigma"),
            0.0,
            math.inf,
            "finite numbers >= 0",
            allow_auto=True,
        )
        overrides[f"{phase}_noise_placement"] = choices_list(
            flag + "noise_placement", getattr(args, f"{phase}_noise_placement"), PLACEMENTS + (AUTO,)
        )
    return overrides


def explicit_overrides(chosen: dict, ordering: str, mode: str, effective: dict) -> tuple:
    """The phase overrides of one grid point that change something: ((key, value), ...), leaving
    out `auto`, a value equal to the shared axis, and noise options of a clean phase."""
    explicit = []
    for key in chosen:
        value = chosen[key]
        if value == AUTO:
            continue
        phase, f = key.split("_", 1)
        shared = {"ordering": ordering, "noise_mode": mode}.get(f)
        if shared is not None and value == shared:
            continue  # same as auto
        if f in ("noise_p", "noise_sigma", "noise_placement") and effective[phase] == CLEAN:
            continue  # no meaning for a clean phase
        explicit.append((key, value))
    return tuple(explicit)


def noise_fractions(text: str | None, modes: list[str]) -> list:
    """--p's fractions of corrupted pairs ([None] without it, refused where a noise mode of the
    grid needs one)."""
    if text is None:
        if any(m not in (CLEAN, AUTO) for m in modes):
            raise GridError(
                "--p is missing but a noise mode other than clean is in the grid; "
                "accepted: fractions of corrupted pairs in [0, 1], e.g. --p 0.0,0.25"
            )
        return [None]
    return number_list("--p", text, 0.0, 1.0, "numbers in [0, 1]")


def build_grid(args: argparse.Namespace) -> Grid:
    """Parse and check every list, then form the (deduplicated) grid points."""
    models = choices_list("--models", args.models, list(MODEL_PRESETS))
    grid_axes = grid_flags(args.grid)
    orderings = choices_list("--ordering", args.ordering, ORDERINGS)
    modes = choices_list("--noise_mode", args.noise_mode, NOISE_MODES)
    seeds = seed_list(args.seeds)
    overrides = phase_overrides(args)
    placements = choices_list("--placement", args.placement, PLACEMENTS)
    sigmas = [None] if args.sigma is None else number_list("--sigma", args.sigma, 0.0, math.inf, "finite numbers >= 0")
    ps = noise_fractions(args.p, modes + overrides["train_noise_mode"] + overrides["eval_noise_mode"])

    training = {
        "steps": args.steps,
        "batch_size": args.batch_size,
        "eval_size": args.eval_size,
        "log_every": args.log_every,
        "learning_rate": args.lr,
    }

    override_names = list(overrides)
    points: dict[str, GridPoint] = {}
    axis_paths = list(grid_axes)
    for model, ordering, mode, p, sigma, placement, *over, seed in itertools.product(
        models,
        orderings,
        modes,
        ps,
        sigmas,
        placements,
        *(overrides[k] for k in override_names),
        *grid_axes.values(),
        seeds,
    ):
        chosen = dict(zip(override_names, over[: len(override_names)]))
        sets = tuple(zip(axis_paths, over[len(override_names) :]))
        effective = {
            ph: mode if chosen[f"{ph}_noise_mode"] == AUTO else chosen[f"{ph}_noise_mode"] for ph in ("train", "eval")
        }
        noisy = any(m != CLEAN for m in effective.values())
        explicit = explicit_overrides(chosen, ordering, mode, effective)
        point = GridPoint(
            model=model,
            seed=seed,
            ordering=ordering,
            noise_mode=mode,
            p=p if noisy else None,
            sigma=sigma if noisy else None,
            placement=placement if noisy else None,
            overrides=explicit,
            sets=sets,
        )
        points.setdefault(point.name(), point)
    return Grid(list(points.values()), training, args.save_attention)


# ---------------------------------------------------------------------------
# Jobs: each point's runner command and the settings it resolves to


@dataclass
class SweepJob(Job):
    point: GridPoint | None = None


def make_jobs(grid: Grid, runs_dir: Path) -> list[SweepJob]:
    """One job per grid point, its settings made as its runner would make them."""
    jobs = []
    for point in grid.points:
        try:
            settings = point.settings(grid.training, grid.save_attention)
        except UsageError as err:
            raise GridError(f"run {point.name()}: {err}") from None
        spec = MODEL_PRESETS[point.model]
        jobs.append(
            SweepJob(
                point.name(),
                settings,
                runs_dir / point.name(),
                cost=spec.relative_cost(settings.model.num_layers, settings.train.steps),
                point=point,
            )
        )
    return plan(jobs)
