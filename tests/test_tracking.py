"""Optional wandb tracking (src/tracking.py): the wandb block and wandb:<choice> are validated
before any work; mode disabled is silent; without wandb one line says how to install it and the
run goes on; with wandb installed (`pip install wandb`), wandb:on writes an offline run in the run
directory whose history holds the same values as metrics.jsonl (that test skips elsewhere)."""

import json
import struct
from pathlib import Path

import pytest

from src.cli.recipe import main as recipe_main
from src.settings import SettingsError
from src.tracking import wandb_spec

TINY = [
    "task:mqar",
    "--task.vocab_size",
    "32",
    "--task.seq_len",
    "16",
    "--task.num_pairs",
    "2",
    "--model.width",
    "16",
    "--model.n_head",
    "2",
    "--train.train_steps",
    "20",
    "--train.log_every",
    "10",
    "--train.eval_size",
    "32",
    "--quiet",
]


def test_the_wandb_block_is_checked_by_key():
    assert wandb_spec(None) is None
    spec = wandb_spec({"project": "In-Context Function Learning", "entity": None, "mode": "offline"})
    assert (spec.mode, spec.project, spec.entity) == ("offline", "In-Context Function Learning", None)
    for raw, words in (
        ({"mode": "cloud"}, "wandb.mode='cloud' is not accepted"),
        ({"projekt": "x"}, "wandb.projekt: unknown key"),
        ("on", "a mapping"),
    ):
        with pytest.raises(SettingsError, match=words):
            wandb_spec(raw)


def test_without_wandb_one_line_and_no_tracker(tmp_path, monkeypatch, capsys):
    """start() gives no tracker (the pipeline then logs to metrics.jsonl only) and says so once;
    mode disabled is silent."""
    import builtins
    from src.tracking import WandbSpec, start

    real_import = builtins.__import__

    def no_wandb(name, *args, **kwargs):
        if name == "wandb":
            raise ImportError("No module named 'wandb'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_wandb)
    assert start(WandbSpec(), tmp_path, {}, "run", "step") is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install wandb" in err[0]
    assert start(WandbSpec(mode="disabled"), tmp_path, {}, "run", "step") is None
    assert start(None, tmp_path, {}, "run", "step") is None
    assert capsys.readouterr().err == "" and not any(tmp_path.iterdir())


def test_a_bad_wandb_choice_is_one_line(capsys):
    assert recipe_main(["wandb:cloud", *TINY, "--out", "never"]) == 2
    assert "wandb:cloud is unknown; accepted: wandb:None" in capsys.readouterr().err
    assert not Path("never").exists()


def _records(path: Path):
    """The records of a .wandb file (LevelDB's log format: 32 KiB blocks, 7-byte record headers
    — crc, little-endian length, type FULL/FIRST/MIDDLE/LAST — after a 7-byte file header)."""
    data, out, block, pos, part = path.read_bytes(), [], 32768, 7, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # the block's tail is padding
            pos += block - pos % block
            continue
        length, kind = struct.unpack("<HB", data[pos + 4 : pos + 7])
        part += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST
            out.append(part)
            part = b""
        elif kind == 0:
            break
    return out


def test_wandb_on_writes_an_offline_run_with_the_metrics_rows(tmp_path):
    pytest.importorskip("wandb")
    from wandb.proto import wandb_internal_pb2

    out = tmp_path / "run"
    assert recipe_main(["wandb:on", *TINY, "--out", str(out)]) == 0
    files = list((out / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 1
    history = []
    for raw in _records(files[0]):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        if record.WhichOneof("record_type") == "history":
            history.append(
                {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            )
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(history) == len(rows) == 2
    for logged, row in zip(history, rows):
        assert logged["_step"] == row["step"]
        for key, value in row.items():
            if isinstance(value, float):
                assert logged[key] == value, key
