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

Each run is the config's settings with its sequence mixer and seed (Garg et al.'s LSTM: the lstm
preset at the same width, depth and position count), made by the job engine (finished runs are
reused); every analysis is a registered one, written into the run at the end of its training. The
report is report/MATRIX.md, report/matrix_results.json and report/figures/matrix/heatmap.png
(quick: under report/quick; plots/matrix_report.py).
"""
from __future__ import annotations

import sys
from dataclasses import replace
from typing import Sequence

from plots.matrix_report import write_report
from src.flags import UsageError, fail, seed_list
from src.jobs.study import cell_jobs, finish_study, read_settings, study_dirs, study_parser
from src.models.sequence import lstm
from src.process import guarded
from src.registry import choice, registry
from src.systems.gpt2 import GPT2Settings

PROG = "python -m scripts.matrix"
CONFIG = "configs/matrix.yaml"
SEEDS = (0, 1, 2)
QUICK_MIXERS = ("softmax_causal", "linear", "lstm")
# mixers that come with their own stack (no residual, norm or state sublayer): the preset that builds it
PRESETS = {"lstm": lstm}
QUICK = {"steps": 60, "log_every": 30, "checkpoint_every": 60, "eval_size": 200}


def mixer_names(text: str | None) -> list[str]:
    """--mixers: registered sequence mixers (default: all of them; UsageError, one line)."""
    known = registry("seq_mixer").names()
    names = [m.strip() for m in (text or ",".join(known)).split(",") if m.strip()]
    unknown = [m for m in names if m not in known]
    if unknown or not names:
        raise UsageError(f"--mixers={text!r} is not accepted; accepted: a comma list of {', '.join(known)}")
    return list(dict.fromkeys(names))


def cell_settings(base, mixer: str):
    """The base settings with `mixer` as every layer's sequence mixer (lstm: the lstm preset)."""
    m, preset = base.model, PRESETS.get(mixer)
    if preset is not None:
        return replace(base, model=preset(n_dims=m.n_dims, n_embd=m.width, n_layer=m.n_layer,
                                          n_positions=m.max_tokens // 2))
    return replace(base, model=replace(m, seq_mixer=choice("seq_mixer", mixer)))


def make_jobs(runs_dir, mixers: Sequence[str], seeds: Sequence[int], quick: bool, config: str = CONFIG):
    base = read_settings(config)
    if not isinstance(base, GPT2Settings):
        raise UsageError(f"--config={config!r}: system={base.system!r} is not accepted; accepted: gpt2 (a "
                         "sequence model on (x, y) pairs)")
    if quick:
        base = replace(base, train=replace(base.train, **QUICK))
    return cell_jobs(runs_dir, {mixer: cell_settings(base, mixer) for mixer in mixers}, seeds)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = study_parser(PROG, __doc__, f"{', '.join(QUICK_MIXERS)}; 60 steps, seed 0 (a smoke test)")
    parser.add_argument("--mixers", default=None, help="comma list of sequence mixers (default: every registered one)")
    parser.add_argument("--seeds", default=None, help=f"comma list (default: {','.join(map(str, SEEDS))})")
    parser.add_argument("--config", default=CONFIG, help=f"the base settings (default: {CONFIG})")
    args = parser.parse_args(argv)
    try:
        runs_dir, report_dir = study_dirs(args, "matrix")
        mixers = mixer_names(args.mixers or (",".join(QUICK_MIXERS) if args.quick else None))
        seeds = seed_list(args.seeds) if args.seeds else (SEEDS[:1] if args.quick else SEEDS)
    except UsageError as err:
        return fail(PROG, err)
    return finish_study(PROG, argv, args, runs_dir, report_dir,
                        lambda: make_jobs(runs_dir, mixers, seeds, args.quick, args.config), write_report)


if __name__ == "__main__":
    sys.exit(guarded(main))
