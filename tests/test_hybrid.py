"""Hybrid stacks (src/models/sequence.py `seq_mixers`): each layer takes its own sequence mixer,
the pattern repeating over the layers; every system that builds the sequence family reads it
(the recipe's --model.seq_mixers, a GPT-2 YAML's model.attention_types), config.json keeps it,
and settings without one are written exactly as before it existed. (Training, resuming and
rerunning a hybrid from config.json: tests/test_resume.py, system lm_hybrid.)"""

from __future__ import annotations

import json
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from src.flags import UsageError
from src.models.sequence import build_sequence
from src.models.sequence_presets import lm
from src.registry import choice
from src.settings import SettingsError
from src.systems.lm import LMSettings


def hybrid(*names, n_layer=3, **based_options):
    model = lm(width=16, n_layer=n_layer, n_head=2, max_len=12, vocab_size=20)
    mixers = tuple(choice("seq_mixer", n, **(based_options if n == "based" else {})) for n in names)
    return replace(model, seq_mixers=mixers)


def test_each_layer_takes_its_mixer_and_the_pattern_repeats():
    config = hybrid("base_conv", "based", n_layer=5, feature_dim=3)
    assert [m.name for m in config.layer_mixers()] == ["base_conv", "based", "base_conv", "based", "base_conv"]
    model = build_sequence(config)
    params, _ = model.init(jax.random.key(0), jnp.zeros((2, 12), jnp.int32))
    mixer_parts = {
        i: sorted(k.split("seq_mixer/")[1].split("/")[0] for k in params if f"block_{i}/seq_mixer/" in k)
        for i in range(5)
    }
    assert mixer_parts[0] == mixer_parts[2] == mixer_parts[4] == ["projection", "short_conv"]
    assert mixer_parts[1] == mixer_parts[3] == ["k", "out", "q", "v"]
    assert params["lm/block_1/seq_mixer/q"]["w"].shape == (16, 2 * 3)  # based's feature_dim per head
    assert config.mixer_label() == "base_conv+based"


def test_a_hybrid_is_not_its_first_mixer_alone():
    tokens = jax.random.randint(jax.random.key(1), (2, 12), 0, 20)
    outs = []
    for config in (hybrid("based", "softmax_causal", n_layer=2), replace(hybrid("based", n_layer=2))):
        model = build_sequence(config)
        params, state = model.init(jax.random.key(0), tokens)
        outs.append(np.asarray(model.apply(params, state, tokens)))
    assert outs[0].shape == outs[1].shape and not np.allclose(outs[0], outs[1], atol=1e-4)


def test_config_json_keeps_a_hybrid_and_leaves_plain_settings_as_before():
    from src.systems.lm import lm_settings

    task = choice("task", "mqar", vocab_size=20, seq_len=12, num_pairs=2)
    plain = lm_settings(
        task, choice("seq_mixer", "softmax_causal"), choice("state_mixer", "mlp"), width=16, n_layer=2, n_head=2
    )
    assert "seq_mixers" not in plain.to_dict()["model"]  # the same record and digest as before
    mixed = lm_settings(
        task,
        choice("seq_mixer", "based", feature_dim=3),
        choice("state_mixer", "mlp"),
        width=16,
        n_layer=2,
        n_head=2,
        seq_mixers=(choice("seq_mixer", "base_conv"), choice("seq_mixer", "based", feature_dim=3)),
    )
    written = json.loads(json.dumps(mixed.to_dict()))
    assert [m["name"] for m in written["model"]["seq_mixers"]] == ["base_conv", "based"]
    assert LMSettings.from_dict(written) == mixed and mixed.digest() != plain.digest()


@pytest.mark.parametrize(
    "value, words",
    [
        (["base_conv", "flash"], "model.seq_mixers[1]='flash' is unknown; accepted:"),
        ("based", "model.seq_mixers='based' is not accepted; accepted: a list of names of registry 'seq_mixer'"),
        ([{"name": "based", "options": {"feature_dim": 0}}], "model.seq_mixers[0].options.feature_dim=0"),
    ],
)
def test_a_bad_hybrid_in_a_record_is_refused_in_one_line(value, words):
    from src.systems.lm import lm_settings

    task = choice("task", "mqar", vocab_size=20, seq_len=12, num_pairs=2)
    raw = lm_settings(
        task, choice("seq_mixer", "softmax_causal"), choice("state_mixer", "mlp"), width=16, n_layer=2, n_head=2
    ).to_dict()
    raw["model"]["seq_mixers"] = value
    with pytest.raises(SettingsError) as err:
        LMSettings.from_dict(raw).validate()
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_recipe_flag_builds_the_hybrid_and_refuses_an_unknown_name():
    from src.cli.recipe import parse

    settings = parse(
        [
            "task:mqar",
            "model.seq_mixer:based",
            "--model.seq_mixer.feature_dim",
            "4",
            "--model.seq_mixers",
            "base_conv,based,attention",
            "--model.n_layer",
            "3",
        ]
    )[0]
    names = [m.name for m in settings.model.seq_mixers]
    assert names == ["base_conv", "based", "softmax_causal"]
    assert settings.model.seq_mixers[1].options.feature_dim == 4  # the chosen mixer's options
    with pytest.raises(
        UsageError, match=r"--model.seq_mixers='base_conv,flash': 'flash' is unknown; accepted: attention, base_conv"
    ):
        parse(["task:mqar", "--model.seq_mixers", "base_conv,flash"])


def test_a_gpt2_yaml_names_the_layers_mixers():
    from src.cli.gpt2 import settings_from_config

    raw = {
        "model": {
            "family": "gpt2",
            "n_dims": 5,
            "n_embd": 16,
            "n_head": 2,
            "n_layer": 2,
            "n_positions": 11,
            "attention_type": "based",
            "attention_kwargs": {"feature_dim": 4},
            "attention_types": ["base_conv", "based"],
        },
        "training": {
            "task": "linear_regression",
            "train_steps": 3,
            "curriculum": {
                "dims": {"start": 5, "end": 5, "inc": 1, "interval": 100},
                "points": {"start": 11, "end": 11, "inc": 2, "interval": 100},
            },
        },
    }
    settings, _ = settings_from_config(raw)
    assert [m.name for m in settings.model.seq_mixers] == ["base_conv", "based"]
    assert settings.model.seq_mixers[1].options.feature_dim == 4
    raw["model"]["attention_types"] = ["base_conv", "flash"]
    with pytest.raises(UsageError, match=r"model.attention_types\[1\]='flash' is unknown"):
        settings_from_config(raw)
    raw["model"]["attention_types"] = "based"
    with pytest.raises(UsageError, match="model.attention_types='based' is not accepted; accepted: a list"):
        settings_from_config(raw)


def test_a_position_encoding_inside_attention_is_refused_for_a_layer_that_cannot_take_it():
    from src.cli.gpt2 import settings_from_config

    raw = {
        "model": {
            "family": "gpt2",
            "n_embd": 16,
            "n_head": 2,
            "n_layer": 2,
            "position": "rope",
            "attention_types": ["softmax_causal", "based"],
        },
        "training": {"task": "linear_regression", "train_steps": 3},
    }
    with pytest.raises(UsageError, match="based"):
        settings_from_config(raw)
