"""The length study's backbones (Lin et al. AAAI 2025): the llama and mamba presets' parameter
counts against the original's Hugging Face models, counted by hand here, and its base_model
config keys (family Llama2 / Mamba) read, refused by name, and trained."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
import yaml

from src.models.sequence import build_sequence
from src.models.sequence_presets import LLAMA_SIZES, llama, mamba

ROOT = Path(__file__).resolve().parent.parent
N_IN = 20  # the original's n_in_dims: its curriculum's last dimension (dim-20 files)
LLAMA_VOCAB = 32_000  # Hugging Face LlamaConfig.vocab_size: LlamaModel's embed_tokens, never read
MAMBA_VOCAB = 50_280  # MambaConfig.vocab_size: MambaModel's embeddings, never read


def hf_llama_for_icl(width: int, layers: int) -> int:
    """LlamaForInContextLearning as the study's build_model configures it: input Linear (no bias),
    LlamaModel (embed_tokens; per layer q, k, v, o of D x D, gate/up/down of D x 4D, two RMSNorm
    scales; the final norm), output Linear D -> 1 (no bias)."""
    intermediate = 4 * width  # build_model: intermediate_size = hidden_size * 4
    layer = 4 * width * width + 3 * width * intermediate + 2 * width
    return N_IN * width + LLAMA_VOCAB * width + layers * layer + width + width


def hf_mamba_for_icl(width: int, layers: int, state: int = 16) -> int:
    """MambaForInContextLearning: input Linear, MambaModel (embeddings; per layer an RMSNorm and
    a MambaMixer: in_proj D x 2E, depthwise conv E x 4 + bias, x_proj E x (R + 2N), dt_proj
    R x E + bias, A_log E x N, D E, out_proj E x D; norm_f), output Linear."""
    inner, rank = 2 * width, -(-width // 16)
    mixer = (
        width * 2 * inner
        + inner * 4
        + inner
        + inner * (rank + 2 * state)
        + rank * inner
        + inner
        + inner * state
        + inner
        + inner * width
    )
    return N_IN * width + MAMBA_VOCAB * width + layers * (width + mixer) + width + width


def count(config) -> int:
    model = build_sequence(config)
    xs, ys = jnp.ones((1, 3, config.n_dims)), jnp.ones((1, 3))
    params, _ = jax.eval_shape(model.init, jax.random.key(0), xs, ys)  # shapes only
    return sum(math.prod(p.shape) for p in jax.tree_util.tree_leaves(params))


@pytest.mark.parametrize("size", list(LLAMA_SIZES))
def test_llama_presets_count_the_original_parameters_but_its_unused_token_table(size):
    width, layers, _ = LLAMA_SIZES[size]
    assert count(llama(size, n_dims=N_IN)) == hf_llama_for_icl(width, layers) - LLAMA_VOCAB * width


def test_the_documented_counts():
    """The numbers the README states (ours; the original's adds V x D of its token table)."""
    assert {s: count(llama(s, n_dims=N_IN)) for s in LLAMA_SIZES} == {
        "tiny": 2_103_808,
        "small": 4_201_984,
        "standard": 16_791_040,
        "large": 67_136_512,
    }
    assert {s: hf_llama_for_icl(*LLAMA_SIZES[s][:2]) for s in LLAMA_SIZES} == {
        "tiny": 10_295_808,
        "small": 12_393_984,
        "standard": 24_983_040,
        "large": 83_520_512,
    }
    assert count(mamba(n_dims=N_IN)) == hf_mamba_for_icl(256, 32) - MAMBA_VOCAB * 256 == 14_022_144
    assert hf_mamba_for_icl(256, 32) == 26_893_824


def write_config(tmp_path: Path, model: dict, **training) -> Path:
    config = {
        "model": model,
        "out_dir": str(tmp_path / "run"),
        "training": {
            "batch_size": 4,
            "learning_rate": 3e-4,
            "train_steps": 2,
            "save_every_steps": 2,
            "log_every": 1,
            "eval_size": 8,
            "task": "linear_regression",
            "curriculum": {
                "dims": {"start": 5, "end": 20, "inc": 1, "interval": 2000},
                "points": {"start": 11, "end": 51, "inc": 2, "interval": 2000},
            },
            **training,
        },
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def train(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "runners.train", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=400,
    )


LLAMA_TINY = {
    "type": "decoder",
    "family": "Llama2",
    "max_length": [102],
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "hidden_act": "silu",
    "rope_theta": 10000,
}
MAMBA_STANDARD = {
    "type": "ssm",
    "family": "Mamba",
    "max_length": ["inf"],
    "hidden_size": 256,
    "state_size": 16,
    "num_hidden_layers": 32,
}


def train_here(*argv: str) -> int:
    """runners.train in this process (no second start-up of JAX)."""
    from runners.train import main

    return main(list(argv))


def test_a_llama2_config_in_the_originals_keys_trains(tmp_path):
    import json

    assert train_here("--config", str(write_config(tmp_path, LLAMA_TINY)), "--quiet") == 0
    model = json.loads((tmp_path / "run" / "config.json").read_text())["settings"]["model"]
    assert (model["preset"], model["width"], model["n_layer"], model["n_head"]) == ("llama", 256, 2, 4)
    assert model["position"]["name"] == "rope" and model["position"]["options"]["theta"] == 10000
    assert model["state_mixer"] == {"name": "swiglu", "options": {"hidden_ratio": 4.0}}
    assert model["biases"] is False and model["max_tokens"] == 102 and model["n_dims"] == 20


def test_a_max_length_list_trains_one_run_per_length_as_its_train_py(tmp_path, capsys, monkeypatch):
    from src.flags import DRY_RUN
    from src.cli.gpt2 import read_run_configs

    small = {
        **LLAMA_TINY,
        "hidden_size": 16,
        "num_attention_heads": 2,
        "num_hidden_layers": 1,
        "max_length": [24, 102],
        "position": "learned",
    }
    config = write_config(
        tmp_path, small, curriculum={"dims": {"start": 5, "end": 5}, "points": {"start": 11, "end": 11}}
    )
    runs = read_run_configs(str(config))
    assert [(out.name, s.model.max_tokens) for s, out, _ in runs] == [
        ("run_max_length24", 24),
        ("run_max_length102", 102),
    ]
    monkeypatch.setenv(DRY_RUN, "1")  # the command goes through both (one line each), writes nothing
    assert train_here("--config", str(config)) == 0
    assert capsys.readouterr().out.count("would train") == 2 and not (tmp_path / "run_max_length24").exists()
    # a length that cannot hold the trained points is refused before the first run trains
    (tmp_path / "bad").mkdir()
    bad = write_config(
        tmp_path / "bad",
        {**small, "max_length": [102, 12]},
        curriculum={"dims": {"start": 5, "end": 5}, "points": {"start": 11, "end": 11}},
    )
    monkeypatch.delenv(DRY_RUN)
    assert train_here("--config", str(bad), "--quiet") == 2
    assert not any(p.name.startswith("run") for p in (tmp_path / "bad").iterdir())
    assert "model.max_length=12" in capsys.readouterr().err


def test_a_mamba_config_in_the_originals_keys_trains(tmp_path):
    import json

    assert (
        train_here(
            "--config", str(write_config(tmp_path, MAMBA_STANDARD)), "--set", "model.num_hidden_layers=1", "--quiet"
        )
        == 0
    )
    model = json.loads((tmp_path / "run" / "config.json").read_text())["settings"]["model"]
    assert (model["preset"], model["seq_mixer"]["name"], model["state_mixer"]["name"]) == ("mamba", "mamba", "none")
    assert model["position"]["name"] == "nope" and model["seq_mixer"]["options"]["state_size"] == 16


@pytest.mark.parametrize(
    "change, words",
    [
        ({"n_embd": 64}, "model.n_embd: unknown key for family Llama2"),
        ({"max_length": [102, 102]}, "model.max_length=[102, 102] is not accepted; accepted: distinct lengths"),
        ({"max_length": 1}, "model.max_length=1 is not accepted; accepted: an integer >= 2"),
        # the study trains max_length 102 on 201 points (rope needs no table); a learned table must cover them
        ({"max_length": 50, "position": "learned"}, "model.max_length=50 is not accepted; accepted: >= 102"),
        ({"hidden_act": "gelu"}, "model.hidden_act='gelu' is not accepted; accepted: silu"),
        ({"type": "ssm"}, "model.type='ssm' is not accepted; accepted: decoder"),
        ({"num_attention_heads": 3}, "model.hidden_size=256 is not accepted; accepted: a multiple of n_head=3"),
        ({"family": "Llama3"}, "model.family='Llama3' is unknown"),
    ],
)
def test_llama2_keys_are_refused_by_name(tmp_path, change, words):
    from src.flags import UsageError
    from src.cli.gpt2 import read_config

    with pytest.raises(UsageError) as refused:
        read_config(str(write_config(tmp_path, {**LLAMA_TINY, **change})))
    assert words in str(refused.value) and "\n" not in str(refused.value)


def test_a_refused_backbone_key_exits_2_in_one_line_before_any_work(tmp_path):
    done = train("--config", str(write_config(tmp_path, {**MAMBA_STANDARD, "num_attention_heads": 4})))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "model.num_attention_heads: unknown key for family Mamba" in done.stderr
    assert not (tmp_path / "run").exists()
