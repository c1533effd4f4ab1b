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
preset at the same width, depth and position count; a mixer with a chunked form: chunks balanced
to the prompt's tokens), made by the job engine (finished runs are reused); every analysis is a
registered one, those the report reads (ANALYSES) written into the run at the end of its training. The
report is report/MATRIX.md, report/matrix_results.json and report/figures/matrix/heatmap.png
(quick: under report/quick; plots/matrix_report.py).
"""
from __future__ import annotations

import math
import sys
from dataclasses import fields, replace
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
# the analyses the report reads (plots/matrix_report.py); the others a run could make (inductive_bias)
# are left out, and `python -m analysis.<name> --run RUN` adds one to a finished run
ANALYSES = ("alignment", "icl_curve", "robustness", "loss_figure")


def mixer_names(text: str | None) -> list[str]:
    """--mixers: registered sequence mixers (default: all of them; UsageError, one line)."""
    known = registry("seq_mixer").names()
    names = [m.strip() for m in (text or ",".join(known)).split(",") if m.strip()]
    unknown = [m for m in names if m not in known]
    if unknown or not names:
        raise UsageError(f"--mixers={text!r} is not accepted; accepted: a comma list of {', '.join(known)}")
    return list(dict.fromkeys(names))


def balanced_chunk(tokens: int, chunk: int) -> int:
    """The chunk of at most `chunk` positions that cuts `tokens` into as few chunks of equal size as
    it can, ⌈T / ⌈T / C⌉⌉: 22 tokens in chunks of 11 rather than 16 (padded to 32), or of 22 rather
    than Mamba-2's 64."""
    return math.ceil(tokens / math.ceil(tokens / chunk))


def cell_settings(base, mixer: str):
    """The base settings with `mixer` as every layer's sequence mixer (lstm: the lstm preset). A
    mixer with a chunked form (an option `chunk`) gets chunks balanced to the training prompts'
    tokens (balanced_chunk): the same map, the float rounding of another chunk, and on 2 CPU cores
    1.1-2x faster a step (Mamba-2 2x, GLA 1.4x, Gated DeltaNet and RWKV-7 about 1.1x)."""
    m, preset = base.model, PRESETS.get(mixer)
    if preset is not None:
        return replace(base, model=preset(n_dims=m.n_dims, n_embd=m.width, n_layer=m.n_layer,
                                          n_positions=m.max_tokens // 2))
    mixer_choice = choice("seq_mixer", mixer)
    options = mixer_choice.options
    if any(f.name == "chunk" for f in fields(options)):
        tokens = 2 * base.curriculum.points.end          # x and y tokens of every point (the GPT-2 layout)
        mixer_choice = choice("seq_mixer", mixer, chunk=balanced_chunk(tokens, options.chunk))
    return replace(base, model=replace(m, seq_mixer=mixer_choice))


def make_jobs(runs_dir, mixers: Sequence[str], seeds: Sequence[int], quick: bool, config: str = CONFIG):
    base = read_settings(config)
    if not isinstance(base, GPT2Settings):
        raise UsageError(f"--config={config!r}: system={base.system!r} is not accepted; accepted: gpt2 (a "
                         "sequence model on (x, y) pairs)")
    if quick:
        base = replace(base, train=replace(base.train, **QUICK))
    return cell_jobs(runs_dir, {mixer: cell_settings(base, mixer) for mixer in mixers}, seeds, ANALYSES)


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
