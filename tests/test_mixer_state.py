"""Every sequence mixer declares its recurrent state (src/models/mixers/kit.py `state_floats`): the
floats it keeps per sequence and layer, against sizes written out by hand."""

from __future__ import annotations

from src.registry import registry


def test_every_sequence_mixer_declares_its_recurrent_state():
    """Floats per sequence and layer at D = 12, H = 3 (K = 4), T = 23, written out by hand."""
    from src.models.mixers.kit import state_floats

    reg = registry("seq_mixer")
    expected = {
        "softmax_causal": 2 * 23 * 12,
        "local": 2 * 8 * 12,
        "local_global": 2 * 23 * 12,
        "mqa": 2 * 23 * 4,
        "rela": 2 * 23 * 12,
        "favor": 3 * 64 * 5,
        "rebased": 3 * 4 * 5,
        "linear": 3 * 16,
        "linear_attention": 3 * 16,
        "gated_linear_attn": 3 * 16,
        "mamba": 24 * (16 + 3),
        "short_conv": 3 * 12,
        "base_conv": 2 * 12,
        "delta_net": 3 * 16 + 3 * 3 * 12,
        "gated_delta_net": 3 * 4 * 8 + 3 * 4 * 12,
        "based": 3 * (1 + 16 + 136) * 5,
        "hyena": 23 * 12 + 2 * 36,
        "h3": 64 * 12 * 3,
        "mamba2": 3 * 8 * 16 + 3 * (24 + 32),
        "rwkv7": 3 * 16 + 12,
        "lstm": 2 * 12,
    }
    assert set(reg.names()) == set(expected), "a mixer without a state size written out here"
    for name, floats in expected.items():
        entry = reg.get(name)
        assert entry.build.state_doc
        assert state_floats(name, entry.default_options(), width=12, num_heads=3, tokens=23) == floats, name
    base = reg.get("base_conv")
    assert state_floats("base_conv", base.options(kernel_size=-1), width=12, num_heads=3, tokens=23) == 23 * 12
    hedgehog = reg.get("linear_attention").options(feature_map="hedgehog")
    assert state_floats("linear_attention", hedgehog, width=12, num_heads=3, tokens=23) == 3 * 8 * 4
