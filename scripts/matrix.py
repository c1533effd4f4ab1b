"""The matrix study: does a sequence mixer other than one linear self-attention layer implement a
step of gradient descent in context? Every registered sequence mixer trained on von Oswald et al.'s
in-context linear regression (configs/matrix.yaml: d = 10, 10 context pairs and a query, x ~
U(-1/2, 1/2)^d), 3 seeds, each analysed the same way: its loss against one tuned GD step and least
squares, its alignment with that GD step (prediction difference and sensitivity cosine, as
analysis/alignment does for the paper's model), the ICL curve, the robustness stresses and the
length test. `make matrix` runs it.

    python -m scripts.matrix                          # every registered sequence mixer, seeds 0, 1, 2
    python -m scripts.matrix --mixers softmax_causal,mamba,lstm   # any of them
    python -m scripts.matrix --quick                  # 3 mixers, 60 steps, seed 0 (a smoke test)
    python -m scripts.matrix --config my_matrix.yaml  # another base (the settings schema of config.json)
    python -m scripts.matrix --mixers 'linear_attention:feature_map=identity:output_norm=none'  # options
    python -m scripts.matrix --mixers softmax_causal+linear,linear+softmax_causal   # hybrid stacks
    python -m scripts.matrix --config configs/matrix_settling.yaml   # chosen rows, 10,000 steps, 2 rates

Each run is the config's settings with its sequence mixer and seed (Garg et al.'s LSTM: the lstm
preset at the same width, depth and position count; a mixer with a chunked form: chunks balanced
to the prompt's tokens unless its spelling sets `chunk`), made by the job engine (finished runs are
reused); every analysis is a registered one, those the report reads (ANALYSES) written into the run
at the end of its training. A mixer is spelled `name` or `name:option=value[:option=value ...]`. The
report is report/MATRIX.md, report/matrix_results.json and report/figures/matrix/heatmap.png
(quick: under report/quick; plots/matrix_report.py).

The config may hold, beside the settings, the study's own mapping `matrix:` (read_protocol in
scripts/matrix_config.py; each key optional): `mixers` (a list of spellings; --mixers wins), `seeds`
(--seeds wins), `steps` (every run's training steps) and `learning_rates` (every mixer trained at each; its best rate,
by the mean
eval loss over seeds, and the mixer that won are written to matrix_rates.json and printed). A run
made under a `steps` or `learning_rates` key is named for them (`delta_net_steps10000_lr0.0005_seed0`),
and such a config's runs and report go to runs/<config name> and report/<config name> unless
--runs-dir and --report-dir say otherwise. configs/matrix.yaml has no such mapping: `make matrix` is
as it was.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace
from pathlib import Path
from typing import Sequence

import jax
import numpy as np

from analysis.alignment import TUNE_SEED
from analysis.common import pairs_of
from baselines.gd_step import ETA_GRID, averaging
from plots.matrix_report import write_report
from scripts.matrix_config import Protocol, mixer_names, read_config
from src.flags import UsageError, seed_list
from src.jobs.declared import Cell, Study, StudyRun, cell_runs
from src.jobs.study import run_as_command, study_command
from src.mixer_spec import mixer_of
from src.models.sequence_presets import lstm

CONFIG = "configs/matrix.yaml"
SEEDS = (0, 1, 2)
QUICK_MIXERS = ("softmax_causal", "linear", "lstm")
# mixers that come with their own stack (no residual, norm or state sublayer): the preset that builds it
PRESETS = {"lstm": lstm}
QUICK = {"steps": 60, "log_every": 30, "checkpoint_every": 60, "eval_size": 200}
# the analyses the report reads (plots/matrix_report.py); the others a run could make (inductive_bias)
# are left out, and `python -m analysis.<name> --run RUN` adds one to a finished run
ANALYSES = ("alignment", "icl_curve", "robustness", "loss_figure")
RATES = "matrix_rates.json"


def mixer_label(mixer: str) -> str:
    """A mixer's spelling as a run-name part: `linear_attention:feature_map=identity` is
    `linear_attention_feature_map-identity`; a bare name is itself."""
    return "_".join(part.strip().replace("=", "-") for part in mixer.split(":"))


def balanced_chunk(tokens: int, chunk: int) -> int:
    """The chunk of at most `chunk` positions that cuts `tokens` into as few chunks of equal size as
    it can, ⌈T / ⌈T / C⌉⌉: 22 tokens in chunks of 11 rather than 16 (padded to 32), or of 22 rather
    than Mamba-2's 64."""
    return math.ceil(tokens / math.ceil(tokens / chunk))


def cell_settings(base, mixer: str):
    """The base settings with `mixer` (a spelling: name or name:option=value) as every layer's
    sequence mixer (lstm: the lstm preset), or, joined by '+', a hybrid stack whose layer i takes
    the i-th (`softmax_causal+linear`: softmax attention first, linear attention second). A mixer with a chunked form
    (an option `chunk`) gets
    chunks balanced to the training prompts' tokens (balanced_chunk) unless its spelling sets one:
    the same map, the float rounding of another chunk, and on 2 CPU cores 1.1-2x faster a step
    (Mamba-2 2x, GLA 1.4x, Gated DeltaNet and RWKV-7 about 1.1x)."""
    m = base.model
    if "+" in mixer:  # a hybrid stack: layer i takes the i-th, repeating
        layers = tuple(_layer_choice(base, part.strip()) for part in mixer.split("+"))
        presets = [c.name for c in layers if c.name in PRESETS]
        if presets:
            raise UsageError(
                f"--mixers={mixer!r}: {presets[0]} has a stack of its own (a preset); accepted: "
                "mixers of the residual stack joined by '+'"
            )
        return replace(base, model=replace(m, seq_mixer=layers[-1], seq_mixers=layers))
    mixer_choice = _layer_choice(base, mixer)
    preset = PRESETS.get(mixer_choice.name)
    if preset is not None:
        return replace(
            base, model=preset(n_dims=m.n_dims, n_embd=m.width, n_layer=m.n_layer, n_positions=m.max_tokens // 2)
        )
    return replace(base, model=replace(m, seq_mixer=mixer_choice))


def _layer_choice(base, mixer: str):
    """One layer's mixer of its spelling, its chunk balanced to the prompt's tokens unless typed."""
    mixer_choice = mixer_of(mixer, "--mixers")
    options = mixer_choice.options
    typed = {part.partition("=")[0].strip() for part in mixer.split(":")[1:]}
    if any(f.name == "chunk" for f in fields(options)) and "chunk" not in typed:
        tokens = 2 * base.curriculum.points.end  # x and y tokens of every point (the GPT-2 layout)
        mixer_choice = replace(mixer_choice, options=replace(options, chunk=balanced_chunk(tokens, options.chunk)))
    return mixer_choice


def plan_cells(base, mixers: Sequence[str], protocol: Protocol = Protocol()) -> dict[str, tuple[str, object]]:
    """cell name -> (mixer spelling, settings): every mixer at every learning rate of the protocol
    (its steps too). With no `steps` or `learning_rates` a cell is the mixer's name, as it always was;
    otherwise the name says them (`delta_net_steps10000_lr0.002`)."""
    if protocol.steps is not None:
        base = replace(base, train=replace(base.train, steps=protocol.steps))
    rates = protocol.learning_rates or (None,)
    cells = {}
    for mixer in mixers:
        settings = cell_settings(base, mixer)
        for rate in rates:
            name = mixer_label(mixer) + (f"_steps{protocol.steps}" if protocol.steps is not None else "")
            if rate is not None:
                name += f"_lr{rate:g}"
                cells[name] = (mixer, replace(settings, train=replace(settings.train, learning_rate=rate)))
            else:
                cells[name] = (mixer, settings)
    return cells


def study_cells(
    mixers: Sequence[str], quick: bool, config: str = CONFIG, protocol: Protocol | None = None
) -> dict[str, tuple[str, object]]:
    """plan_cells of the config's settings (`--quick`: QUICK's training, the protocol's steps
    ignored). `protocol`: the config's `matrix:` mapping (None: read from `config`)."""
    base, read = read_config(config)
    protocol = read if protocol is None else protocol
    if quick:
        base = replace(base, train=replace(base.train, **QUICK))
        protocol = replace(protocol, steps=None)
    return plan_cells(base, mixers, protocol)


def grid_cells(
    mixers: Sequence[str], quick: bool, config: str = CONFIG, protocol: Protocol | None = None
) -> list[Cell]:
    """study_cells as the study's cells, each with its mixer's spelling (tag `mixer`)."""
    cells = study_cells(mixers, quick, config, protocol)
    return [Cell(name, settings, {"mixer": mixer}, analyses=ANALYSES) for name, (mixer, settings) in cells.items()]


def make_jobs(
    runs_dir,
    mixers: Sequence[str],
    seeds: Sequence[int],
    quick: bool,
    config: str = CONFIG,
    protocol: Protocol | None = None,
):
    """The study's runs: every cell (study_cells) x seed."""
    return cell_runs(grid_cells(mixers, quick, config, protocol), seeds, runs_dir)


def rate_summary(jobs: Sequence, mixer_of_cell: dict[str, str]) -> dict:
    """Each mixer's cells (one per learning rate) read from the runs' alignment analysis, mean over
    seeds, its best rate (the lowest mean eval loss; only rates every seed finished count) and the
    mixers ranked by their best loss / GD: {"mixers": {...}, "ranking": [...], "winner": ...}."""
    from src.stats import over_seeds

    runs: dict = {}
    for job in jobs:
        try:
            align = job.run.load_json("analysis/alignment.json")
        except Exception:  # a run without the analysis: counted as missing
            align = {}
        runs.setdefault(job.cell, []).append((job, align))
    mixers: dict = {}
    for cell, members in runs.items():
        job = members[0][0]
        stats = {
            k: over_seeds([a.get(k) for _, a in members]) for k in ("model_loss", "gd_loss", "zero_loss", "align_cos")
        }
        stats["loss_vs_gd"] = over_seeds(
            [a["model_loss"] / a["gd_loss"] if a.get("gd_loss") else None for _, a in members]
        )
        complete = stats["model_loss"]["n"] == len(members)
        mine = mixers.setdefault(mixer_of_cell[cell], {"rates": {}})
        mine["rates"][f"{job.settings.train.learning_rate:g}"] = {
            "cell": cell,
            "learning_rate": job.settings.train.learning_rate,
            "steps": job.settings.train.steps,
            "seeds": [j.seed for j, _ in members],
            "complete": complete,
            **stats,
        }
    for mine in mixers.values():
        done = {r: c for r, c in mine["rates"].items() if c["complete"]}
        best = min(done, key=lambda r: done[r]["model_loss"]["mean"]) if done else None
        mine["best_rate"] = None if best is None else done[best]["learning_rate"]
        mine["best_loss_vs_gd"] = None if best is None else done[best]["loss_vs_gd"]["mean"]
    ranking = sorted(
        (m for m in mixers if mixers[m]["best_loss_vs_gd"] is not None), key=lambda m: mixers[m]["best_loss_vs_gd"]
    )
    return {"mixers": mixers, "ranking": ranking, "winner": ranking[0] if ranking else None}


def rate_lines(summary: dict) -> list[str]:
    """The best rate of every mixer and the winner, one line each (what the study prints)."""
    lines = []
    for mixer, mine in summary["mixers"].items():
        each = ", ".join(f"lr {r}: {c['loss_vs_gd']['mean']:.3f}" for r, c in mine["rates"].items() if c["complete"])
        best = (
            "no rate finished"
            if mine["best_rate"] is None
            else f"best lr {mine['best_rate']:g} (loss / GD {mine['best_loss_vs_gd']:.3f})"
        )
        lines.append(f"  {mixer}: {best}; {each}")
    if summary["winner"] is not None:
        lines.append(
            f"  won: {summary['winner']} (loss / GD {summary['mixers'][summary['winner']]['best_loss_vs_gd']:.3f})"
        )
    return lines


def write_rates(run: StudyRun, protocol: Protocol) -> Path:
    """report_dir/matrix_rates.json: rate_summary with its provenance (commit, clean tree or not,
    machine, date, the runs' training seconds, wall seconds, command, config)."""
    import datetime as dt
    from plots.provenance import machine, training_seconds
    from src.files import atomic_write_json

    jobs, head, seconds = run.jobs, run.head, run.seconds
    summary = rate_summary(jobs, {job.cell: job.mixer for job in jobs})
    train_total, counted = training_seconds(jobs)
    out = run.report_dir / RATES
    atomic_write_json(
        out,
        {
            "produced": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "commit": head.get("commit"),
            "clean_tree": None if head.get("dirty") is None else not head["dirty"],
            "machine": machine(),
            "command": run.command,
            "config": run.flags.config,
            "wall_seconds": round(seconds, 1),
            "train_seconds": round(train_total, 1),
            "runs": len(jobs),
            "runs_timed": counted,
            "steps": sorted({j.settings.train.steps for j in jobs}),
            "learning_rates": list(protocol.learning_rates or ()),
            "seeds": sorted({j.seed for j in jobs}),
            "selection": "each mixer's best rate: the lowest eval loss (analysis/alignment.json model_loss) "
            "averaged over seeds, among rates every seed finished",
            **summary,
        },
    )
    print("\n".join(["best learning rate per mixer (loss / one GD step, mean over seeds):", *rate_lines(summary)]))
    return out


def gd_curve(settings) -> np.ndarray:
    """[n] one GD step's error (squared error / d) with k = 0 .. n−1 examples on the run's eval
    prompts, η tuned at every k (the grid of SPEC §2 in ŷ = (η/k) Σ y_i x_i·x_q) on as many
    held-out prompts (analysis.alignment's TUNE_SEED). The icl_curve analysis's own gd_step tunes one
    η for all k jointly (3.0 on these inputs, where the best η runs from about 1 at k = 1 to about 6
    at k = N = 10), so the study computes the stronger
    reference itself."""
    pairs = pairs_of(settings)
    batch = pairs.prompts()
    size, points, dims = batch.xs.shape
    held = pairs.sampler()(jax.random.key(TUNE_SEED), size, dims, points)
    grid = np.asarray(ETA_GRID, dtype=np.float64)[:, None]
    held_base, held_ys = np.asarray(averaging(held), np.float64), np.asarray(held.ys, np.float64)
    best = grid[np.argmin([np.mean((eta * held_base - held_ys) ** 2, axis=0) for eta in grid[:, 0]], axis=0), 0]
    base, ys = np.asarray(averaging(batch), np.float64), np.asarray(batch.ys, np.float64)
    return np.mean((best[None] * base - ys) ** 2, axis=0) / dims


def gd_curves(jobs: Sequence) -> list[np.ndarray]:
    """gd_curve of each job's settings, computed once per eval set (every run of the study shares one)."""

    def eval_set(s) -> tuple:  # what fixes a run's eval prompts
        return s.task, s.curriculum, s.train.eval_size, s.train.eval_seed

    curves: dict = {}
    for job in jobs:
        if eval_set(job.settings) not in curves:
            curves[eval_set(job.settings)] = gd_curve(job.settings)
    return [curves[eval_set(job.settings)] for job in jobs]


def add_flags(parser) -> None:
    parser.add_argument("--mixers", default=None, help="comma list of sequence mixers (default: every registered one)")
    parser.add_argument("--seeds", default=None, help=f"comma list (default: {','.join(map(str, SEEDS))})")
    parser.add_argument("--config", default=CONFIG, help=f"the base settings (default: {CONFIG})")


def other_protocol_places(flags) -> None:
    """A config whose protocol varies steps or rates has its own runs and report (runs/<stem>, report/<stem>)."""
    _, protocol = read_config(flags.config)
    if protocol.varies and not flags.quick:
        stem = Path(flags.config).stem
        flags.runs_dir = flags.runs_dir or f"runs/{stem}"
        flags.report_dir = flags.report_dir or f"report/{stem}"


def mixers_of(flags) -> list[str]:
    _, protocol = read_config(flags.config)
    default = ",".join(QUICK_MIXERS) if flags.quick else (",".join(protocol.mixers) if protocol.mixers else None)
    return mixer_names(flags.mixers or default)


def seeds_of(flags) -> list[int]:
    _, protocol = read_config(flags.config)
    return seed_list(flags.seeds) if flags.seeds else (SEEDS[:1] if flags.quick else list(protocol.seeds or SEEDS))


def report(run: StudyRun) -> list[Path]:
    """The report (one tuned GD step's curve beside every run), and the rates' summary where the
    protocol sweeps learning rates."""
    _, protocol = read_config(run.flags.config)
    written = write_report(run, gd_curves(run.jobs))
    if protocol.learning_rates:
        written.append(write_rates(run, protocol))
    return written


STUDY = Study(
    "matrix",
    __doc__,
    f"{', '.join(QUICK_MIXERS)}; 60 steps, seed 0 (a smoke test)",
    cells=lambda flags, runs_dir: grid_cells(mixers_of(flags), flags.quick, flags.config),
    report=report,
    seeds=seeds_of,
    flags=add_flags,
    check=mixers_of,
    prepare=other_protocol_places,
)
main = study_command(STUDY)

if __name__ == "__main__":
    run_as_command(STUDY)
