"""The length study's configuration files as its users have them (configs/lengthgen/, the
original's layout): `!include` composition, the positional path of its train.py, its task and
encoding names, its training block, and the one-line refusals of bad trees."""

import shutil
from pathlib import Path

import pytest

from src.flags import UsageError
from src.cli.gpt2 import main as train_main, read_config
from src.yaml_includes import load
from src.rundir import RunDir

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "configs" / "lengthgen"
TINY_MODEL = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}
TINY_CURRICULUM = (
    "dims:\n  start: 4\n  end: 4\n  increment: 1\n  interval: 2\n"
    "points:\n  start: 5\n  end: 7\n  increment: 2\n  interval: 2\n"
)


def tiny_copy(tmp_path: Path) -> Path:
    """The shipped tree, unchanged but for the sizes: a tiny model, curriculum and step count."""
    tree = tmp_path / "configs"
    shutil.copytree(TREE, tree)
    for family in ("llama", "mamba"):
        for file in (tree / "base_model" / family).glob("*.yaml"):
            text = file.read_text()
            for key, value in TINY_MODEL.items():
                text = "\n".join(
                    f"{key}: {value}" if line.startswith(f"{key}:") else line for line in text.splitlines()
                )
            file.write_text(text + "\n")
    (tree / "hyperparams" / "curriculum" / "dim-50_pts-200.yaml").write_text(TINY_CURRICULUM)
    args = tree / "hyperparams" / "training_args.yaml"
    args.write_text(
        args.read_text()
        .replace("max_steps: 50000", "max_steps: 4")
        .replace("logging_steps: 10", "logging_steps: 2")
        .replace("save_steps: 500", "save_steps: 2")
        .replace("per_device_train_batch_size: 64", "per_device_train_batch_size: 8")
    )
    return tree


def test_every_shipped_config_composes_and_maps_onto_our_settings():
    files = sorted(TREE.glob("tasks/*/*.yaml"))
    assert len(files) == 14 * 7
    raw = load(TREE / "tasks/linear_regression/alibi.yaml")
    assert raw["model"]["family"] == "Llama2" and raw["patch"]["rope_scaling"]["type"] == "alibi"
    assert raw["task"]["curriculum"]["points"]["end"] == 201 and raw["training"]["max_steps"] == 50000


@pytest.mark.parametrize(
    "task, encoding, ours",
    [
        ("linear_regression", "alibi", ("linear_regression", "alibi", "llama")),
        ("cnf", "dynamic_yarn", ("cnf3", "dynamic_yarn", "llama")),
        ("sparse_thres", "rope", ("sparse_threshold", "rope", "llama")),
        ("dnf", "mamba", ("dnf3", "nope", "mamba")),
    ],
)
def test_names_encodings_and_the_training_loop_map_to_ours(task, encoding, ours, tmp_path):
    settings, out = read_config(str(tiny_copy(tmp_path) / "tasks" / task / f"{encoding}.yaml"))
    assert (settings.task.name, settings.model.position.name, settings.model.preset) == ours
    tr = settings.train
    # the study's train.py: AdamW (torch's weight decay 0.01), warm-up then linear decay, no clipping
    assert (tr.steps, tr.batch_size, tr.learning_rate, tr.warmup_fraction, tr.weight_decay, tr.grad_clip) == (
        4,
        8,
        3e-4,
        0.03,
        0.01,
        0.0,
    )
    assert out == Path("runs/train") / f"{task}_{encoding}"


@pytest.mark.parametrize(
    "task, encoding, analyses", [("linear_regression", "fire", False), ("conjunction", "mamba", True)]
)
def test_a_copy_of_the_tree_trains_through_runners_train(task, encoding, analyses, tmp_path):
    """conjunction/mamba through `python -m runners.train CONFIG` itself; linear_regression/fire
    through the same two calls without the analyses that follow every run (the suite's time)."""
    config = tiny_copy(tmp_path) / "tasks" / task / f"{encoding}.yaml"
    out = tmp_path / "run"
    if analyses:
        assert train_main([str(config), "--out", str(out), "--quiet"]) == 0
    else:
        from src.cli.command import train_command

        settings, _ = read_config(str(config))
        assert (
            train_command(
                "runners.train", settings, out, runner="runners.train", argv=[str(config)], quiet=True, analyses=()
            )
            == 0
        )
    run = RunDir(out)
    assert run.is_complete() and run.load_json("metrics_summary.json")["steps"] == 4


def _one_line(argv, capsys) -> str:
    try:
        code = train_main(argv)
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_includes_resolve_nested_and_bad_trees_are_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "top.yaml").write_text("x: !include ../b/mid.yaml\n")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "mid.yaml").write_text("y: !include leaf.yaml\n")
    (tmp_path / "b" / "leaf.yaml").write_text("z: 3\n")
    assert load(tmp_path / "a" / "top.yaml") == {"x": {"y": {"z": 3}}}
    (tmp_path / "b" / "leaf.yaml").write_text("z: !include ../a/top.yaml\n")
    line = _one_line([str(tmp_path / "a" / "top.yaml")], capsys)
    assert "!include cycle" in line and "top.yaml" in line
    (tmp_path / "b" / "leaf.yaml").write_text("z: !include gone.yaml\n")
    line = _one_line(["--config", str(tmp_path / "a" / "top.yaml")], capsys)
    assert "gone.yaml: no such file" in line and "leaf.yaml" in line
    (tmp_path / "evil.yaml").write_text("model: !!python/object/apply:os.system ['true']\n")
    assert "python/object/apply" in _one_line([str(tmp_path / "evil.yaml")], capsys)
    assert "one config is needed" in _one_line([], capsys)
    with pytest.raises(UsageError, match="training.fp16: unknown key"):
        bad = tiny_copy(tmp_path / "t") / "tasks" / "parity" / "nope.yaml"
        (bad.parent.parent.parent / "hyperparams" / "training_args.yaml").write_text("fp16: true\n")
        read_config(str(bad))


def test_the_warm_up_then_linear_decay_is_hugging_faces():
    """get_linear_schedule_with_warmup: step/w below w = ⌈fraction · total⌉, then (total − step)/(total − w)."""
    from src.optim import WARMUP_DECAYS

    total, fraction = 40, 0.03
    warmup = 2  # ⌈1.2⌉
    schedule = WARMUP_DECAYS["linear"](3e-4, fraction, total)
    for step in range(total + 1):
        hf = step / warmup if step < warmup else max(0.0, (total - step) / (total - warmup))
        assert float(schedule(step)) == pytest.approx(3e-4 * hf, rel=1e-6, abs=1e-12)


def test_the_docs_quote_the_memory_the_standard_size_is_refused_with(monkeypatch):
    """README.md and docs/length_generalisation.md quote what the memory check computes for the
    study's alibi config as typed (they said ~142 GiB while the tool said 32.0 GiB)."""
    import re
    from src import bounds
    from src.systems.gpt2_prompts import run_bytes

    monkeypatch.setattr(bounds, "available_bytes", lambda: None)  # estimate, whatever is free here
    settings, _ = read_config(str(ROOT / "configs/lengthgen/tasks/linear_regression/alibi.yaml"))
    needed = run_bytes(settings)
    for doc in ("README.md", "docs/length_generalisation.md"):
        quoted = re.findall(r"refused on a laptop in one line: about ([\d.]+) GiB", (ROOT / doc).read_text())
        assert quoted and {float(q) for q in quoted} == {round(needed / 2**30, 1)}, (doc, quoted)


def test_held_out_evaluation_follows_eval_steps_and_takes_eval_size(tmp_path):
    """Its train.py logs the training batch's loss every logging_steps (ours: every step, in
    training_log.csv) and evaluates held-out prompts only after training; ours evaluates at
    eval_steps (100 in its configs; at logging_steps' 10 an evaluation of about 40 s would follow
    every 25 s of training on 2 cores), and eval_size is taken as ours."""
    settings, _ = read_config(
        str(TREE / "tasks/linear_regression/alibi.yaml"),
        ["model.hidden_size=64", "model.num_hidden_layers=2", "training.eval_size=100"],
    )
    assert (settings.train.log_every, settings.train.eval_size) == (100, 100)
    tree = tiny_copy(tmp_path)
    args = tree / "hyperparams" / "training_args.yaml"
    args.write_text("\n".join(line for line in args.read_text().splitlines() if not line.startswith("eval_steps")))
    settings, _ = read_config(str(tree / "tasks/linear_regression/alibi.yaml"))
    assert settings.train.log_every == 2  # no eval_steps: logging_steps sets the log points
