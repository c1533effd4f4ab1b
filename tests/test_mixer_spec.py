"""One spelling of a sequence mixer with its options (src/mixer_spec.py), `name` or
`name:option=value[:...]`, and hybrid stacks of them: the same Choices from a study's list, the
recipe's --model.seq_mixers and a YAML's model.attention_types; every bad spelling one line."""

import pytest

from src.flags import UsageError
from src.mixer_spec import mixer_of, mixer_stack
from src.registry import choice


def test_a_spelling_is_the_choice_with_those_options_and_the_rest_at_defaults():
    assert mixer_of("base_conv:kernel_size=-1", "f") == choice("seq_mixer", "base_conv", kernel_size=-1)
    assert mixer_of(" based : feature_dim = 8 ", "f") == choice("seq_mixer", "based", feature_dim=8)
    assert mixer_of("attention", "f") == choice("seq_mixer", "softmax_causal")
    assert mixer_of("rwkv7:norm_eps=1e-4", "f").options.norm_eps == 1e-4  # a number, not text


def test_a_stack_takes_the_chosen_mixers_options_for_its_bare_name():
    chosen = choice("seq_mixer", "based", feature_dim=4)
    layers = mixer_stack("base_conv,based,based:feature_dim=8,attention", ",", "--model.seq_mixers", chosen)
    assert [m.name for m in layers] == ["base_conv", "based", "based", "softmax_causal"]
    assert [layers[1].options.feature_dim, layers[2].options.feature_dim] == [4, 8]


@pytest.mark.parametrize(
    "typed, words",
    [
        ("flash", "--mixers='flash': 'flash' is unknown; accepted: attention, base_conv"),
        ("base_conv:kernel_size=0", "--mixers='base_conv:kernel_size=0': base_conv: kernel_size=0; accepted: -1"),
        ("base_conv:size=3", "seq_mixer 'base_conv' has no option 'size'; accepted: filter_order, kernel_size"),
        ("base_conv:=3", "'=3' is not accepted; accepted: name:option=value"),
        ("base_conv+", "an empty entry; accepted: mixers joined by '+'"),
    ],
)
def test_a_bad_spelling_is_one_line(typed, words):
    with pytest.raises(UsageError) as err:
        mixer_stack(typed, "+", "--mixers")
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_recipe_and_a_gpt2_yaml_read_the_same_spelling():
    from src.cli.gpt2 import settings_from_config
    from src.cli.recipe import parse

    recipe = parse(["task:mqar", "--model.seq_mixers", "base_conv,base_conv:kernel_size=-1"])[0].model.seq_mixers
    raw = {
        "model": {
            "family": "gpt2",
            "n_dims": 5,
            "n_embd": 16,
            "n_head": 2,
            "n_layer": 2,
            "n_positions": 11,
            "attention_type": "softmax_causal",
            "attention_types": ["base_conv", "base_conv:kernel_size=-1"],
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
    yaml = settings_from_config(raw)[0].model.seq_mixers
    assert recipe == yaml == (choice("seq_mixer", "base_conv"), choice("seq_mixer", "base_conv", kernel_size=-1))
    raw["model"]["attention_types"] = ["base_conv:kernel_size=-5"]
    with pytest.raises(UsageError, match="model.attention_types='base_conv:kernel_size=-5': base_conv: kernel_size=-5"):
        settings_from_config(raw)
