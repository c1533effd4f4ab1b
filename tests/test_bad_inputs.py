"""The bad-input probe as a table (tests/bad_input_table.py): every command line, fed values a
demanding user might type. Each row must end before any work with exit code != 0 and ONE line on
stderr that names the flag, key or file (no traceback, no "unexpected" error), and must create
nothing.

The commands run in-process (their `main(argv)` through `src.process.guarded`), so 150+ rows cost
seconds: every refusal happens while flags and settings are checked, before JAX compiles.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import eval_noise
import eval_order
from analysis import alignment, attention_heatmap, attention_stats, icl_curve, ood_eval, robustness
from analysis import algorithm_selection, induction, length_gen, probes, prompt_tests, recency
from analysis import dynamics as dynamics_analysis
from plots import fig_templates
from scripts import dynamics as dynamics_study
from scripts.bench import compare_originals
from scripts import (
    lengthgen,
    linear_attention,
    mechanisms,
    paper_scale,
    protocol_sweep,
    reproduce,
    yarn_recency,
)
from scripts import matrix as matrix_study
from scripts import mixers as mixers_study
from scripts import task_diversity as task_diversity_study
from scripts import zoo as zoo_study
from src.rundir.__main__ import check_main
from src.cli import dynamics as dynamics_cli, gpt2 as gpt2_cli, lsa as lsa_cli
from src.cli import recipe as recipe_cli, rerun
from src.gd_paper import sweep
from src.process import guarded
from bad_input_table import ROWS

ROOT = Path(__file__).resolve().parent.parent

CLIS = {
    "concat": lambda argv: lsa_cli.main("lsa1", "runner", argv),
    "copy": lambda argv: lsa_cli.main("twolayer", "runner", argv),
    "rerun": rerun.main,
    "train": gpt2_cli.main,
    "runners.dynamics": dynamics_cli.main,
    "eval_order": lambda argv: sweep.main(eval_order.DEFAULTS, argv),
    "eval_noise": lambda argv: sweep.main(eval_noise.DEFAULTS, argv),
    "mechanisms": mechanisms.main,
    "dynamics": dynamics_study.main,
    "reproduce": reproduce.main,
    "alignment": alignment.main,
    "ood_eval": ood_eval.main,
    "attention_stats": attention_stats.main,
    "attention_heatmap": attention_heatmap.main,
    "icl_curve": icl_curve.main,
    "robustness": robustness.main,
    "analysis.dynamics": dynamics_analysis.main,
    "fig_templates": fig_templates.main,
    "rundir": check_main,
    "recipe": recipe_cli.main,
    "lengthgen": lengthgen.main,
    "mixers": mixers_study.main,
    "paper_scale": paper_scale.main,
    "linear_attention": linear_attention.main,
    "compare_originals": compare_originals.main,
    "protocol_sweep": protocol_sweep.main,
    "yarn_recency": yarn_recency.main,
    "length_gen": length_gen.main,
    "recency": recency.main,
    "induction": induction.main,
    "probes": probes.main,
    "algorithm_selection": algorithm_selection.main,
    "prompt_tests": prompt_tests.main,
    "zoo": zoo_study.main,
    "task_diversity": task_diversity_study.main,
    "matrix": matrix_study.main,
}


def test_a_repeated_analysis_is_refused_in_one_line():
    from src.cli.gpt2 import settings_from_config
    from src.flags import UsageError
    from src.yaml_includes import load

    settings = settings_from_config(load(ROOT / "configs/quick.yaml"))[0]
    assert rerun.analyses_of("icl_curve", settings) == ("icl_curve",)
    with pytest.raises(UsageError, match=r"--analyses='icl_curve,icl_curve' names 'icl_curve' twice"):
        rerun.analyses_of("icl_curve,icl_curve", settings)


def test_the_table_is_big_enough():
    assert len(ROWS) >= 150, len(ROWS)
    assert {cli for cli, _, _ in ROWS} == set(CLIS)


def _ids():
    return [f"{i:03d}-{cli}-{'_'.join(argv)[:40]}" for i, (cli, argv, _) in enumerate(ROWS)]


@pytest.mark.parametrize("cli,argv,word", ROWS, ids=_ids())
def test_bad_input_is_one_line_before_any_work(cli, argv, word, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    argv = [a.replace("figs", str(tmp_path / "figs")) if a == "figs" else a for a in argv]
    needs_out = cli in ("concat", "copy", "runners.dynamics", "train", "recipe") and "--out" not in argv
    if needs_out:
        argv = argv + ["--out", str(tmp_path / "run")]
    if cli in ("eval_order", "eval_noise") and "--out" not in argv:
        argv = argv + ["--out", str(tmp_path / "r.csv")]
    studies = ("mechanisms", "dynamics", "reproduce", "lengthgen", "mixers", "zoo", "task_diversity", "matrix")
    if cli in ("eval_order", "eval_noise", *studies):
        argv = argv + ["--runs-dir", str(tmp_path / "runs")]
    if cli in studies:
        argv = argv + ["--report-dir", str(tmp_path / "report")]
    if cli in ("mechanisms", "lengthgen", "mixers", "linear_attention", "zoo", "task_diversity", "matrix"):
        # a value wrongly accepted costs seconds
        argv = argv + ["--quick"]
    if cli == "paper_scale":
        argv = argv + ["--runs-dir", str(tmp_path / "runs"), "--tiny", "--estimate"]
    if cli == "rerun" and "--together" not in argv:
        argv = argv + ["--out", str(tmp_path / "run")]
    before = sorted(os.listdir(tmp_path))
    try:
        code = guarded(lambda: CLIS[cli](argv))
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert code not in (0, None), (cli, argv, err)
    assert len(lines) == 1, (cli, argv, err)
    assert "Traceback" not in err and "unexpected" not in lines[0], lines[0]
    assert word in lines[0], (word, lines[0])
    assert sorted(os.listdir(tmp_path)) == before, "a refused command created files"
