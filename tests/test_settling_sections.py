"""The settling runs' sections of report/MATRIX.md and report/ZOO.md (plots/matrix_settling.py,
plots/zoo_settling.py) and their rows in the "Beside the paper" tables (plots/paper_rows_von_oswald.py,
plots/paper_rows_zoology.py):
numbers from the recorded results, the setting that differs in kind marked so, each section
rewritten in place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plots import matrix_settling, paper_rows_von_oswald, paper_rows_zoology, zoo_settling
from plots.beside_paper import load_anchors, verdict
from src.flags import UsageError


def stats(*values):
    return {"mean": sum(values) / len(values), "std": 0.0, "n": len(values), "values": list(values)}


def rate_cell(rate, steps, loss, gd=0.2078):
    return {
        "learning_rate": rate,
        "steps": steps,
        "seeds": [0],
        "complete": True,
        "model_loss": stats(loss),
        "gd_loss": stats(gd),
        "loss_vs_gd": stats(loss / gd),
    }


RATES = {
    "commit": "7454508",
    "clean_tree": True,
    "produced": "2026-11-29T05:00:00+00:00",
    "mixers": {
        "linear_attention": {
            "rates": {"0.0005": rate_cell(5e-4, 10000, 0.4195), "0.002": rate_cell(2e-3, 10000, 0.4191)},
            "best_rate": 0.002,
            "best_loss_vs_gd": 0.4191 / 0.2078,
        },
        "softmax_causal": {
            "rates": {"0.0005": rate_cell(5e-4, 10000, 0.1837), "0.002": rate_cell(2e-3, 10000, 0.1494)},
            "best_rate": 0.002,
            "best_loss_vs_gd": 0.1494 / 0.2078,
        },
    },
}
REPRODUCE = {
    "results": {
        "copy": {
            "final": {
                "eval_loss": stats(0.2171, 0.2181),
                "gd_loss": stats(0.2093),
                "copy_next": stats(2.1),
                "copy_other": stats(0.04),
            }
        },
        "one_step_gd": {"final": {"eval_loss": stats(0.2095), "gd_loss": stats(0.2093)}},
    }
}


def copy_run(folder: Path, seed: int, mixers=("linear", "linear"), loss=0.31) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(
        json.dumps(
            {
                "settings": {"model": {"mixers": list(mixers)}},
                "git": {"commit": "d130f17d98fdfc94", "dirty": False},
                "command": f"python -m runners.run_softmax_copy --seed {seed}",
            }
        )
    )
    (folder / "metrics_summary.json").write_text(
        json.dumps(
            {
                "status": "complete",
                "steps": 10000,
                "eval_loss": loss,
                "gd_loss": 0.2093,
                "copy_next": 1.4,
                "copy_other": 1.05,
                "align_cos": 0.65,
            }
        )
    )
    return folder


def test_the_matrix_settling_results_and_section_follow_the_runs(tmp_path):
    copy = matrix_settling.copy_layer([copy_run(tmp_path / f"s{i}", i, loss=0.31 + i / 1000) for i in range(3)])
    assert copy["eval_loss"]["mean"] == pytest.approx(0.311) and copy["commits"] == ["d130f17d98fd"]
    data = matrix_settling.results(RATES, copy, REPRODUCE)
    rows = {r["mixer"]: r for r in data["rows"]}
    assert rows["linear_attention"]["loss_vs_gd"]["mean"] == pytest.approx(0.4191 / 0.2078)
    assert rows["linear_attention"]["unlike"] and not rows["softmax_causal"]["unlike"]
    text = "\n".join(matrix_settling.section(data))
    assert "| linear_attention | 10,000 | 0.0005: 2.019, 0.002: 2.017 | 2.017 at 0.002 |" in text
    assert "copy_next / copy_other 1.3 against softmax's 52.5" in text
    assert "lsa1 0.2095 against one GD step's 0.2093" in text
    # the rows' verdicts: not comparable for the interleaved linear attention, by the number for softmax
    anchors = load_anchors()
    built = {r.ours.split(":")[0]: r for r in paper_rows_von_oswald.settling_rows(data)}
    linear = built["the ICL benchmark's linear attention (feature map, no normaliser)"]
    assert verdict(anchors.claims[linear.claim], linear)[0] == "not comparable"
    assert linear.budget.sequences == 10000 * 64


def test_a_copy_run_of_other_mixers_is_refused(tmp_path):
    with pytest.raises(UsageError, match="model.mixers linear,linear"):
        matrix_settling.copy_layer([copy_run(tmp_path / "s", 0, mixers=("softmax", "linear"))])


def test_the_matrix_section_is_rewritten_in_place():
    text = "# The matrix\n\n## Reading\n\nx\n\n## Beside the paper\n\ny\n"
    once = matrix_settling.replace_section(text, [matrix_settling.HEADING, "", "first", ""])
    assert once.index(matrix_settling.HEADING) < once.index("## Beside the paper")
    twice = matrix_settling.replace_section(once, [matrix_settling.HEADING, "", "second", ""])
    assert "first" not in twice and twice.count(matrix_settling.HEADING) == 1 and "y" in twice


def zoo_report(folder: Path, command: str, rows: list[dict], every: list[dict] | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "zoo_results.json").write_text(
        json.dumps({"command": command, "results": rows, "every_rate": every if every is not None else rows})
    )
    (folder / "ZOO.md").write_text(
        "# Zoo\n\n- Produced 2026-11-29 04:00 UTC from commit abcdef123456 (clean tree)\n\n## Beside the paper\n"
    )


def zrow(mixer, rate, accuracy, steps=1500, block=True):
    return {
        "mixer": mixer,
        "learning_rate": rate,
        "accuracy": accuracy,
        "seq_len": 64,
        "kappa": 4,
        "width": 64,
        "steps": steps,
        "batch_size": 64,
        "seed": 0,
        "run": f"mqar_k4_{mixer}_lr{rate}" + ("_zoology_block_seed0" if block else "_seed0"),
    }


def test_the_zoo_section_and_rows_put_each_rate_beside_figure_2(tmp_path):
    h3 = "h3"
    zoo_report(tmp_path, "python -m scripts.zoo", [zrow(h3, 3e-3, 0.43, block=False)])
    grid = [zrow(h3, r, a) for r, a in ((1e-3, 0.20), (3e-3, 0.31), (1e-2, 0.05))]
    zoo_report(tmp_path / zoo_settling.GRID, "python -m scripts.zoo --config grid", [grid[1]], grid)
    zoo_report(tmp_path / zoo_settling.LONG, "python -m scripts.zoo --config long", [zrow(h3, 3e-3, 0.80, steps=15000)])
    text = "\n".join(zoo_settling.section(tmp_path))
    assert f"| {h3} | 0.200 | 0.310 | 0.050 | 0.310 (0.003) | 0.800 | 0.430 | 0.915 |" in text
    assert "does not close the gap" in text and f"{h3} 0.800" in text
    rows = paper_rows_zoology.zoo(json.loads((tmp_path / "zoo_results.json").read_text()), tmp_path)
    labelled = [r for r in rows if "Zoology's block" in r.ours]
    assert [r.value for r in labelled] == [0.31, 0.80]
    assert [r.budget.sequences for r in labelled] == [1500 * 64, 15000 * 64]
    assert "best of 0.001, 0.003, 0.01" in labelled[0].budget.rates


def test_no_zoo_section_without_the_grid(tmp_path):
    zoo_report(tmp_path, "python -m scripts.zoo", [zrow("h3", 3e-3, 0.43, block=False)])
    assert zoo_settling.section(tmp_path) == []
