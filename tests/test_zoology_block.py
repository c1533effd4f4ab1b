"""Zoology's own block on the `lm` family (src.models.sequence_presets.with_block, `block: zoology`):
dropout at rate 0 leaves the model and its records as they were, bit for bit; dropout draws masks
in training only (a per-step key from the run's train key), none at evaluation; positions for
attention only build no table for another mixer; the identity state mixer is h += norm(h); the
tied read-out is the embedding table; bad values are refused in one line."""

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from plots.mixers_report import ZOOLOGY_BLOCK, block_words
from plots.zoo_report import OURS
from scripts.mixers import make_jobs
from scripts.mixers_grid import read_grid
from scripts.zoo import QUICK_GRID
from src.flags import UsageError
from src.models.sequence_presets import block_of, with_block
from src.registry import choice
from src.settings import SettingsError
from src.systems.lm import LMSettings, LMTrain, build_lm, lm_settings
from src.systems.lm_batches import dropout_key, model_inputs, training_loss

ROOT = Path(__file__).resolve().parent.parent
TASK = choice("task", "mqar", vocab_size=64, seq_len=32, num_pairs=4)
NEW_KEYS = ("positions_for", "embed_dropout", "tie_embeddings")


def settings(mixer="softmax_causal", block="ours", **model) -> LMSettings:
    made = lm_settings(
        TASK,
        choice("seq_mixer", mixer),
        choice("state_mixer", "mlp"),
        width=16,
        n_layer=2,
        n_head=1,
        train=LMTrain(batch_size=8, steps=4),
        block=block,
    )
    return replace(made, model=replace(made.model, **model)).validate() if model else made


def test_rate_zero_is_the_model_and_the_record_as_before():
    s = settings()
    record = s.to_dict()
    assert not any(key in record["model"] for key in NEW_KEYS)
    assert record["model"]["seq_mixer"] == {"name": "softmax_causal", "options": {}}  # no dropout, no bias keys
    assert LMSettings.from_dict(record) == s and not s.model.has_dropout() and block_of(s.model) == "ours"
    trainer = build_lm(s)
    batch = trainer.sample(jax.random.key(1), 8)
    plain = np.asarray(trainer.apply(trainer.params0, *model_inputs(batch)))
    keyed = np.asarray(trainer.apply(trainer.params0, *model_inputs(batch), rng=jax.random.key(5)))
    np.testing.assert_array_equal(plain, keyed)  # a key changes nothing at rate 0
    # explicit zero rates are the defaults: the same settings, digest and program
    zero = settings(embed_dropout=0.0, seq_mixer=choice("seq_mixer", "softmax_causal", dropout=0.0))
    assert zero == s and zero.digest() == s.digest()


def test_dropout_draws_masks_in_training_only_from_a_per_step_key():
    trainer = build_lm(settings(block="zoology"))
    assert trainer.settings.model.has_dropout()
    batch = trainer.sample(jax.random.key(1), 8)
    loss = jax.jit(training_loss(trainer.settings, trainer.apply, trainer.objective))
    p = trainer.params0
    step0, step1 = (float(loss(p, batch, dropout_key(trainer.train_key, s))) for s in (0, 1))
    assert step0 != step1  # two steps, two masks
    assert float(loss(p, batch, dropout_key(trainer.train_key, 0))) == step0  # the same step, the same mask
    no_dropout = float(loss(p, batch))
    assert no_dropout not in (step0, step1)
    # evaluation draws nothing: the same numbers every time, equal to the model without a key
    first, again = trainer.scores(p), trainer.scores(p)
    assert first["loss"] == again["loss"] and first["value"] == again["value"]
    np.testing.assert_allclose(np.asarray(trainer._score(p, batch).loss), no_dropout, rtol=1e-6)
    # training is deterministic: the chunk's keys come from the run's train key and the steps
    with trainer.context():
        runs = [np.asarray(trainer.run_chunk(trainer.init_state(), 0, 3).losses) for _ in range(2)]
    np.testing.assert_array_equal(*runs)


@pytest.mark.parametrize("where", ["embed", "attention"])
def test_each_dropout_acts_alone(where):
    rates = (
        {"embed_dropout": 0.5}
        if where == "embed"
        else {"seq_mixer": choice("seq_mixer", "softmax_causal", dropout=0.5)}
    )
    trainer = build_lm(settings(**rates))
    batch = trainer.sample(jax.random.key(1), 8)
    p, inputs = trainer.params0, model_inputs(batch)
    assert not np.array_equal(
        np.asarray(trainer.apply(p, *inputs)), np.asarray(trainer.apply(p, *inputs, rng=jax.random.key(2)))
    )
    # dropout draws nothing at initialisation: the parameters are those of the model without it
    base = build_lm(settings())
    jax.tree_util.tree_map(np.testing.assert_array_equal, base.params0, p)


def positions_table(s: LMSettings) -> bool:
    return any("positions" in leaves for leaves in build_lm(s).params0.values())


def test_positions_for_attention_build_a_table_for_attention_alone():
    assert positions_table(settings("softmax_causal", positions_for="attention"))
    assert not positions_table(settings("base_conv", positions_for="attention"))
    assert positions_table(settings("base_conv"))  # `all`: as before
    hybrid = settings(
        "base_conv",
        positions_for="attention",
        seq_mixers=(choice("seq_mixer", "base_conv"), choice("seq_mixer", "softmax_causal")),
    )
    assert positions_table(hybrid)  # a layer of attention takes it
    assert settings("hyena", positions_for="attention").model.encoding().max_tokens() is None


def test_zoologys_block_is_its_figure_2_model():
    for mixer in ("softmax_causal", "base_conv"):
        m = settings(mixer, block="zoology").model
        assert (m.norm, m.state_mixer.name, m.positions_for, m.embed_dropout, m.tie_embeddings) == (
            choice("norm", "layer_norm", eps=1e-5),
            "identity",
            "attention",
            0.1,
            True,
        )
        assert m.position == choice("position", "learned") and block_of(m) == "zoology"
        assert with_block(m, "zoology") == m
    attention = settings(block="zoology").model.seq_mixer
    assert (attention.options.dropout, attention.options.bias) == (0.1, True)
    params = build_lm(settings(block="zoology")).params0
    assert "lm/unembed" not in params and "lm/block_0/state_mixer/up" not in params
    assert set(params["lm/block_0/seq_mixer/qkv"]) == {"w", "b"}


def test_identity_state_mixer_adds_the_normed_stream_and_the_read_out_is_the_table(monkeypatch):
    from src.models import sequence

    s = settings(block="zoology")
    trainer = build_lm(s)
    p = trainer.params0
    table = p["lm/embed"]["embeddings"]
    assert abs(float(table.std()) - 0.02) < 0.005  # Zoology's nn.Embedding: N(0, 0.02²)
    tokens = trainer.sample(jax.random.key(1), 2).inputs
    logits = trainer.apply(p, tokens)
    captured, tied = {}, sequence.tied_read

    def spy():  # the stack's last hidden state, before the read-out
        read_in, read_out = tied()
        return read_in, lambda c, h: read_out(c, captured.setdefault("h", h))

    monkeypatch.setattr(sequence, "tied_read", spy)
    hk.transform_with_state(lambda t: sequence.SequenceModel(s.model)(t)).apply(p, {}, None, tokens)
    np.testing.assert_allclose(np.asarray(logits), np.asarray(captured["h"] @ table.T), rtol=1e-5, atol=1e-6)
    model = s.model
    # the identity state mixer: the sublayer adds the normed stream, h + LN(h)
    from src.models.sequence import Block

    h = jax.random.normal(jax.random.key(0), (2, 32, 16))
    no_seq = replace(model, seq_mixer=choice("seq_mixer", "softmax_causal"), n_layer=1)
    block = hk.transform(lambda x: Block(no_seq, None, 0, name="b")(x))
    params = block.init(jax.random.key(1), h)
    params = {k: ({n: jnp.zeros_like(v) for n, v in w.items()} if "seq_mixer" in k else w) for k, w in params.items()}
    normed = hk.transform(lambda x: hk.LayerNorm(-1, True, True, eps=1e-5, name="n")(x))
    ln = normed.apply(normed.init(None, h), None, h)
    np.testing.assert_allclose(np.asarray(block.apply(params, None, h)), np.asarray(h + ln), rtol=1e-6, atol=1e-6)


def test_bad_values_are_refused_in_one_line(tmp_path):
    for model, words in [
        ({"positions_for": "some"}, "model.positions_for='some' is not accepted; accepted: all, attention"),
        ({"embed_dropout": 1.0}, "model.embed_dropout=1.0 is not accepted; accepted: a number in [0, 1)"),
        ({"seq_mixer": choice("seq_mixer", "softmax_causal", dropout=-0.1)}, "dropout=-0.1 is not accepted"),
        ({"tie_embeddings": 1}, "model.tie_embeddings=1 is not accepted; accepted: true or false"),
    ]:
        with pytest.raises(SettingsError, match=re.escape(words)) as err:
            settings(**model)
        assert "\n" not in str(err.value)
    with pytest.raises(SettingsError, match=re.escape("block='zoo' is not accepted; accepted: ours, zoology")):
        settings(block="zoo")
    bad = tmp_path / "grid.yaml"
    bad.write_text("cells: [{kappa: 4}]\nblock: zoo\n")
    with pytest.raises(UsageError, match=r"block='zoo' is not accepted; accepted: ours, zoology\Z"):
        read_grid(str(bad))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.zoo",
            "--config",
            str(bad),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--report-dir",
            str(tmp_path / "report"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().count("\n") == 0 and "block='zoo' is not accepted" in done.stderr


def test_gpt2_refuses_dropout_it_would_not_train():
    from src.systems.gpt2 import GPT2Settings

    s = GPT2Settings()
    with pytest.raises(SettingsError, match=r"model.embed_dropout=0.1 is not accepted; accepted: 0 \(the lm system"):
        replace(s, model=replace(s.model, embed_dropout=0.1)).validate()


def test_the_study_asks_for_the_block_per_grid_and_says_so(tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text("cells: [{seq_len: 64, kappa: 4, steps: 40}]\nwidths: [16]\nblock: zoology\n")
    read = read_grid(str(grid))
    assert read.block == "zoology" and read_grid("configs/zoo.yaml").block == "ours"
    jobs = make_jobs(tmp_path, ["attention", "base_conv"], [0], False, replace(read, heads=1))
    assert [j.name for j in jobs] == [
        "mqar_k4_attention_w16_zoology_block_seed0",
        "mqar_k4_base_conv_w16_zoology_block_seed0",
    ]
    assert all(block_of(j.settings.model) == "zoology" and j.block == "zoology" for j in jobs)
    assert block_words(jobs, OURS) == ZOOLOGY_BLOCK
    ours = make_jobs(tmp_path, ["attention"], [0], False, QUICK_GRID)
    assert ours[0].name == "mqar_k4_attention_w16_seed0" and block_words(ours, OURS) == OURS
