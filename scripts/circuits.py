"""How the model does it: induction heads, residual-stream probes and algorithm selection on models
trained here (`make circuits`).

    python -m scripts.circuits            # 13 runs, ~18 min on 2 cores
    python -m scripts.circuits --quick    # 40 steps a run (a smoke test)
    python -m scripts.circuits --parts probes --config configs/gpu/circuits_probes.yaml
                                          # the GPT-2 probes alone, at another size (the GPU queue's job)

The runs (seed 0):
  induction_L1, induction_L2   attention-only models (the `induction` preset at width 64, 2 heads,
                               rotary positions, no MLP, weights N(0, 0.02²)) of 1 and 2 layers on
                               repeated_tokens (V 64, R from [5, 20]), 2,000 steps, batch 64, AdamW
                               1e-3; scored by analysis.induction (R = 20, 64 sequences)
  mqar_L1, mqar_L2             the same two models on MQAR (V 256, T 64, κ 4), scored the same way
  probe_gpt2                   the mechanisms study's softmax GPT-2 (configs/mechanisms.yaml: d = 5,
                               11 points, 3 layers of width 64, 7,000 steps)
  probe_gpt2_fixed_w           the same trained on one fixed w (train.num_tasks = 1): the control;
                               both probed by analysis.probes (4,000 prompts; the untrained model the
                               second control), read at the query and as the mean over the y tokens
  probe_lsa1, probe_twolayer   von Oswald et al.'s two models at the paper's settings (lsa1: one LSA
                               layer on concatenated tokens, 5,000 steps; twolayer: softmax then linear
                               attention on interleaved tokens, 10,000 steps; d = 10, N = 10, batch 2048)
  probe_lsa1_fixed_w, probe_twolayer_fixed_w   each trained on one fixed w: the control; all four
                               probed at the query token (their last layer updates no other token)
  selection_mixture            the same GPT-2 on noise_mixture_regression (σ ∈ {0.1, 0.5}, w ~ N(0, I/d))
  selection_sigma0.1, _sigma0.5   the same on one noise level each (the single-noise models)
                               all three evaluated by analysis.algorithm_selection at N = d = 5
--parts (a comma list of heads, probes, probes_lsa, selection; default all) trains and reports only
those parts; --config gives the GPT-2 of the probe and selection runs (limits_of_icl's config format;
default configs/mechanisms.yaml). The report is report/CIRCUITS.md, report/circuits_results.json
and report/figures/circuits/*.png (quick: under report/quick), beside Olsson et al.'s, Akyürek
et al.'s and Bai et al.'s claims (shared/ANCHORS.md).
"""

from __future__ import annotations

from dataclasses import replace

from plots.circuits_probes import PROBE_READS
from src import rundir as names
from src.formats.limits_of_icl import read_config
from src.gd_paper.presets import preset
from src.jobs.declared import Cell, Study, StudyRun
from src.jobs.study import run_as_command, study_command
from src.models.sequence_presets import induction
from src.flags import UsageError
from src.registry import choice
from src.systems.gpt2 import GPT2Settings
from src.systems.lm import LMSettings, LMTrain

CONFIG = "configs/mechanisms.yaml"
QUICK_STEPS = 40
REPEAT, VOCAB = 20, 64
MQAR_VOCAB, MQAR_TOKENS, MQAR_PAIRS = 256, 64, 4
INDUCTION_TRAIN = LMTrain(
    steps=2000, batch_size=64, learning_rate=1e-3, log_every=100, eval_size=256, checkpoint_every=1000
)
NOISE_STDS = (0.1, 0.5)
PROBE_PROMPTS, QUICK_PROMPTS = 4000, 400
SELECTION_PROMPTS, QUICK_SELECTION_PROMPTS = 20_000, 400
LSA_MODELS = ("lsa1", "twolayer")  # von Oswald et al.'s two models (src/gd_paper/presets.py)
PARTS = ("heads", "probes", "probes_lsa", "selection")  # a cell's `part` tag; --parts chooses among them


# the heads cells' tasks, by the prefix of their names: (vocabulary, tokens a sequence, the task,
# whether it trains the model to predict every next token, so that its loss on repeated random
# tokens is judged)
HEAD_TASKS = {
    "induction": (VOCAB, 1 + 2 * REPEAT, choice("task", "repeated_tokens", vocab_size=VOCAB, repeat=REPEAT), True),
    "mqar": (
        MQAR_VOCAB,
        MQAR_TOKENS,
        choice("task", "mqar", vocab_size=MQAR_VOCAB, seq_len=MQAR_TOKENS, num_pairs=MQAR_PAIRS),
        False,
    ),
}


def induction_cell(layers: int, quick: bool, prefix: str = "induction") -> Cell:
    """The attention-only model of `layers` layers on repeated tokens (induction_L<layers>) or on
    MQAR (mqar_L<layers>: V 256, T 64, κ 4; tokens of [1, V/2) are keys, of [V/2, V) values)."""
    vocab, tokens, task, every_token = HEAD_TASKS[prefix]
    model = replace(
        induction(vocab, tokens, width=64, n_layer=layers, n_head=2), position=choice("position", "rope"), init_std=0.02
    )
    train = (
        replace(INDUCTION_TRAIN, steps=QUICK_STEPS, log_every=20, checkpoint_every=QUICK_STEPS)
        if quick
        else INDUCTION_TRAIN
    )
    settings = LMSettings(task=task, model=model, train=train)
    tags = {"part": "heads", "layers": layers, "task": task.name, "predicts_every_token": every_token}
    return Cell(f"{prefix}_L{layers}", settings, tags, analyses=())


def gpt2_cells(quick: bool, config: str = CONFIG) -> list[Cell]:
    base, _ = read_config(config)
    train = base.train
    if quick:
        train = replace(train, steps=QUICK_STEPS, log_every=20, checkpoint_every=QUICK_STEPS, eval_size=200)
    base = replace(base, train=train)

    def task(**options):
        return replace(base, task=choice("task", "noise_mixture_regression", **options))

    cells = [
        ("probe_gpt2", base, {"part": "probes", "control": False}),
        ("probe_gpt2_fixed_w", replace(base, train=replace(train, num_tasks=1)), {"part": "probes", "control": True}),
        ("selection_mixture", task(noise_stds=NOISE_STDS), {"part": "selection", "noise_stds": list(NOISE_STDS)}),
    ]
    cells += [
        (f"selection_sigma{s:g}", task(noise_stds=(s,)), {"part": "selection", "noise_stds": [s]}) for s in NOISE_STDS
    ]
    return [Cell(name, settings, {**tags, "gpt2": True}, analyses=()) for name, settings, tags in cells]


def lsa_cells(quick: bool) -> list[Cell]:
    """von Oswald et al.'s lsa1 and twolayer at their presets, each with its fixed-w control; cost
    in GPT-2 steps (batch 64) so that the longest start first."""
    cells = []
    for model in LSA_MODELS:
        settings = preset(model)
        train = settings.train
        if quick:
            train = replace(train, steps=QUICK_STEPS, batch_size=64, log_every=20, eval_size=200)
        for control in (False, True):
            trained = replace(settings, train=replace(train, num_tasks=1) if control else train)
            cells.append(
                Cell(
                    f"probe_{model}" + ("_fixed_w" if control else ""),
                    trained,
                    {"part": "probes_lsa", "control": control, "model": model},
                    cost=train.steps * train.batch_size / 64,
                    analyses=(),
                )
            )
    return cells


def parts_of(flags) -> tuple[str, ...]:
    """--parts as a tuple of PARTS (UsageError, one line, for an unknown part)."""
    if getattr(flags, "parts", None) is None:
        return PARTS
    chosen = tuple(p.strip() for p in flags.parts.split(",") if p.strip())
    unknown = [p for p in chosen if p not in PARTS]
    if unknown or not chosen:
        raise UsageError(f"--parts={flags.parts!r} is not accepted; accepted: a comma list of {', '.join(PARTS)}")
    return chosen


def config_of(flags) -> str:
    """--config, else CONFIG (the mechanisms study's GPT-2)."""
    return getattr(flags, "config", None) or CONFIG


def study_cells(flags, runs_dir=None) -> list[Cell]:
    """The cells of the parts --parts names, the GPT-2's from --config."""
    quick, parts = flags.quick, parts_of(flags)
    heads = [induction_cell(layers, quick, prefix) for prefix in HEAD_TASKS for layers in (1, 2)]
    cells = [*heads, *gpt2_cells(quick, config_of(flags)), *lsa_cells(quick)]
    return [cell for cell in cells if cell.tags["part"] in parts]


def add_flags(parser) -> None:
    parser.add_argument("--parts", default=None, help=f"comma list of {', '.join(PARTS)} (default: all)")
    parser.add_argument("--config", default=None, help=f"the GPT-2 of the probe and selection runs (default {CONFIG})")


def gpt2_words(run: StudyRun) -> dict | None:
    """The probed (else the selection) GPT-2's size and training, for the report and its budget row."""
    for job in run.jobs:
        if job.tags.get("gpt2") and not job.tags.get("control"):
            settings = GPT2Settings.from_dict(job.expected)
            model, train = settings.model, settings.train
            return {
                "config": config_of(run.flags),
                "layers": model.n_layer,
                "width": model.width,
                "heads": model.n_head,
                "steps": train.steps,
                "batch_size": train.batch_size,
                "learning_rate": train.learning_rate,
            }
    return None


def aggregate(run: StudyRun) -> dict:
    """{induction: {L1, L2}, probes: {...}, probes_last_y: {...}, probes_y_mean: {...}, probes_lsa: {model: ...},
    selection: {run: ...}}: the analyses' records of the finished runs (each analysis run here, its
    files written into the run)."""
    from analysis import algorithm_selection, induction as induction_scores, probes

    by_name = {job.cell: job for job in run.jobs if job.run.exists(names.SUMMARY)}
    out: dict = {
        "induction": {},
        **{key: None for key, _ in PROBE_READS.values()},
        "probes_lsa": {},
        "lsa_losses": {},
        "selection": {},
        "eval_error": {},
    }
    prompts = QUICK_PROMPTS if run.quick else PROBE_PROMPTS
    for name, job in by_name.items():
        if job.part == "heads":
            scores = induction_scores.run(job.run, repeat=REPEAT, sequences=64)
            out["induction"][name] = {**scores, "predicts_every_token": job.predicts_every_token}
        elif job.part == "selection":
            out["selection"][name] = algorithm_selection.run(
                job.run, NOISE_STDS, prompts=QUICK_SELECTION_PROMPTS if run.quick else SELECTION_PROMPTS
            )
        summary = job.run.load_json(names.SUMMARY)
        out["eval_error"][name] = summary.get("eval_error_last", summary.get("eval_loss"))
        if job.part == "probes_lsa":  # its loss beside one tuned GD step's on its eval tasks
            out["lsa_losses"][name] = {key: summary.get(key) for key in ("eval_loss", "gd_loss")}
    if "probe_gpt2" in by_name:
        control = by_name.get("probe_gpt2_fixed_w")
        for read, (key, _) in PROBE_READS.items():
            out[key] = probes.run(by_name["probe_gpt2"].run, prompts, control.run if control else None, read=read)
    for model in LSA_MODELS:
        if f"probe_{model}" in by_name:
            control = by_name.get(f"probe_{model}_fixed_w")
            out["probes_lsa"][model] = probes.run(
                by_name[f"probe_{model}"].run, prompts, control.run if control else None, read="query"
            )
    out["runs"] = {name: str(job.run.path) for name, job in by_name.items()}
    out["gpt2"], out["parts"] = gpt2_words(run), list(parts_of(run.flags))
    return out


def report(run: StudyRun) -> list:
    from plots.circuits_report import write_report

    return write_report(run, aggregate(run))


STUDY = Study(
    "circuits",
    __doc__,
    f"{QUICK_STEPS} steps a run (a smoke test)",
    cells=study_cells,
    report=report,
    seeds=lambda flags: (0,),
    flags=add_flags,
    check=lambda flags: (parts_of(flags), read_config(flags.config) if flags.config else None),
)
main = study_command(STUDY)

if __name__ == "__main__":
    run_as_command(STUDY)
