"""In-context Markov chains on Edelman et al.'s attention-only transformer (2024, "The Evolution of
Statistical Induction Heads"): `make markov` runs it.

Each sequence is a fresh chain (src/tasks/markov.py: Dirichlet(1) rows, or doubly stochastic
chains, whose stationary distribution is uniform so that counting tokens says nothing), T = 100,
k = 2 and 3 states. The model is the sequence family's `induction` preset (2 layers of 1 head at
width 16, relative key vectors, no MLP, weights from N(0, 0.02²) as minGPT draws them), trained as
the paper's code trains it: AdamW at a constant 5e-4, betas (0.9, 0.95), weight decay 0.1, batch 64,
no gradient clipping, 6,000 steps (its trainer's default is 10,000, its pipeline's 2,000).

    python -m scripts.markov            # 4 cells x 3 seeds, ~15 min on 2 cores
    python -m scripts.markov --quick    # 300 steps, seed 0, k = 2 (a smoke test)

Every 50 steps each run logs its cross-entropy against the true next-token distribution on 512
fixed sequences and its KL divergence from the unigram and bigram estimators' predictions; its
summary holds the estimators' own cross-entropy on the same sequences. The report is
report/MARKOV.md, report/markov_results.json and report/figures/markov/*.png (quick: under
report/quick), beside the paper's claims: a unigram plateau, an abrupt drop to the bigram
solution, and no plateau (and faster learning) under doubly stochastic chains.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from plots.markov_report import write_report
from src import rundir as names
from src.jobs.declared import Cell, Study, StudyRun, quick_cells, quick_seeds
from src.jobs.study import run_as_command, study_command
from src.models.sequence_presets import induction
from src.registry import choice
from src.stats import over_seeds
from src.systems.lm import LMSettings, LMTrain

SEEDS = (0, 1, 2)
STEPS, QUICK_STEPS, LOG_EVERY = 6000, 300, 50
NEAR = 0.02  # "within 2 %": of the unigram estimator's cross-entropy (a plateau), of the bigram's (the end)
PLATEAU_STEPS = 200  # a plateau lasts at least this long (4 log points)
CLOSED = 0.9  # learned: the model has come this share of its way from the uniform level to its final one
TRAIN = LMTrain(
    steps=STEPS,
    batch_size=64,
    learning_rate=5e-4,
    weight_decay=0.1,
    warmup_fraction=None,
    grad_clip=0.0,
    log_every=LOG_EVERY,
    eval_size=512,
    checkpoint_every=1000,
    adam_b2=0.95,
)


def cell_name(states: int, doubly: bool) -> str:
    return f"k{states}_{'doubly' if doubly else 'dirichlet'}"


def study_cells(quick: bool) -> list[Cell]:
    grid = [(2, False), (2, True)] if quick else [(2, False), (3, False), (2, True), (3, True)]
    train = replace(TRAIN, steps=QUICK_STEPS, checkpoint_every=QUICK_STEPS) if quick else TRAIN
    cells = []
    for states, doubly in grid:
        settings = LMSettings(
            task=choice("task", "markov_chain", num_states=states, seq_len=100, doubly_stochastic=doubly),
            model=replace(induction(states, 100), init_std=0.02),
            train=train,
        )
        cells.append(Cell(cell_name(states, doubly), settings, {"states": states, "doubly": doubly}, analyses=()))
    return cells


def longest_near(steps: list[int], values: list[float], target: float, log_every: int) -> tuple[int, int | None]:
    """(steps, first step) of the longest run of consecutive log points within NEAR of `target`."""
    best, start, run_from, length = 0, None, None, 0
    for step, value in zip(steps, values):
        if abs(value / target - 1.0) <= NEAR:
            run_from, length = (step if length == 0 else run_from), length + 1
            if length * log_every > best:
                best, start = length * log_every, run_from
        else:
            length = 0
    return best, start


def run_record(job) -> dict:
    """One run's curve (step, cross-entropy, KL to the unigram and bigram estimators), its
    estimators' cross-entropy and what the report judges: the unigram plateau, the drop, the end."""
    rows = [r for r in job.run.read_metrics() if r.get("eval_cross_entropy") is not None]
    summary = job.run.load_json(names.SUMMARY)
    baselines = {name.removeprefix("markov_"): value for name, value in summary["baselines"].items()}
    steps = [r["step"] for r in rows]
    ce = [r["eval_cross_entropy"] for r in rows]
    plateau, plateau_from = longest_near(steps, ce, baselines["unigram"], job.expected["train"]["log_every"])
    done_at = ce[-1] + (1 - CLOSED) * (baselines["uniform"] - ce[-1])  # CLOSED of its way from uniform to its end
    learned = next((s for s, v in zip(steps, ce) if v <= done_at), None)
    return {
        "run": job.name,
        "seed": job.seed,
        "curve": [[s, v, r["eval_kl_unigram"], r["eval_kl_bigram"]] for s, v, r in zip(steps, ce, rows)],
        "baselines": baselines,
        "final": ce[-1],
        "final_over_bigram": ce[-1] / baselines["bigram"] - 1.0,
        "plateau_steps": plateau,
        "plateau_from": plateau_from,
        "learned_at": learned,
        "cross_entropy_by_position": summary.get("cross_entropy_by_position"),
    }


BANDS = ((0, 5), (5, 10), (10, 20), (20, 50), (50, 100))  # positions t, for where the model and Bayes part


def estimators_by_position(job) -> dict[str, list[float]]:
    """Each estimator's cross-entropy at every position on the run's own eval set (the trainer's
    `evaluation`: one set per cell, whatever the seed)."""
    from baselines.markov import estimator_cross_entropy
    from src.systems import build

    trainer = build(LMSettings.from_dict(job.expected).validate())
    batch = trainer.evaluation
    return {name: [round(float(v), 6) for v in estimator_cross_entropy(name, batch)] for name in ("unigram", "bigram")}


def bands(model: list[list[float]], bigram: list[float]) -> list[dict]:
    """Per band of positions: the model's cross-entropy (mean over seeds and positions) and the
    bigram estimator's, and the model's excess over it."""
    mean = np.mean(np.asarray(model, np.float64), axis=0)
    out = []
    for low, high in BANDS:
        ours, bayes = float(mean[low:high].mean()), float(np.mean(bigram[low:high]))
        out.append({"positions": [low, high - 1], "model": ours, "bigram": bayes, "over_bigram": ours / bayes - 1.0})
    return out


def aggregate(run: StudyRun) -> dict:
    """{cell: {states, doubly, runs, final, final_over_bigram, last_over_bigram (at the last token
    t = T − 1 alone), plateau_steps, learned_at (over seeds), baselines}} of the finished runs."""
    cells: dict = {}
    for job in run.jobs:
        if not job.run.exists(names.SUMMARY):
            continue
        cell = cells.setdefault(job.cell, {"states": job.states, "doubly": job.doubly, "runs": []})
        cell["runs"].append(run_record(job))
    for name, cell in cells.items():
        runs = cell["runs"]
        cell["baselines"] = runs[0]["baselines"]  # one fixed eval set per cell
        for key in ("final", "final_over_bigram", "plateau_steps"):
            cell[key] = over_seeds([r[key] for r in runs])
        cell["learned_at"] = over_seeds([r["learned_at"] for r in runs])
        job = next(j for j in run.jobs if j.cell == name)
        cell["estimators_by_position"] = estimators_by_position(job)
        bigram = cell["estimators_by_position"]["bigram"]
        cell["bands"] = bands([r["cross_entropy_by_position"] for r in runs], bigram)
        for r in runs:  # the original's test metric: the last token alone (test_error.test_last_token)
            r["last_over_bigram"] = r["cross_entropy_by_position"][-1] / bigram[-1] - 1.0
        cell["last_over_bigram"] = over_seeds([r["last_over_bigram"] for r in runs])
    return cells


def report(run: StudyRun) -> list:
    return write_report(run, aggregate(run), near=NEAR, plateau_steps=PLATEAU_STEPS, closed=CLOSED)


STUDY = Study(
    "markov",
    __doc__,
    "300 steps, seed 0, k = 2 (a smoke test)",
    cells=quick_cells(study_cells),
    report=report,
    seeds=quick_seeds(SEEDS),
)
main = study_command(STUDY)

if __name__ == "__main__":
    run_as_command(STUDY)
