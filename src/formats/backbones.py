"""The length study's backbones as its config files name them (Lin et al. AAAI 2025,
configs/base_model/{llama,mamba}/*.yaml: Hugging Face's LlamaConfig and MambaConfig keys), read
onto the `llama` and `mamba` presets of the one sequence family (src/models/sequence_presets.py).

    family: Llama2   type (decoder), hidden_size, num_hidden_layers, num_attention_heads,
                     hidden_act (silu), rope_theta, max_length, intermediate_size (default 4 ×
                     hidden_size, as the study's build_model sets it), rms_norm_eps (1e-6);
                     ours: position (default rope, Llama's own), position_kwargs
    family: Mamba    type (ssm), hidden_size, num_hidden_layers, state_size (16), expand (2),
                     conv_kernel (4), time_step_rank (auto = ⌈hidden_size / 16⌉),
                     layer_norm_epsilon (1e-5), max_length ("inf": no position table)

`max_length` is the tokens the position encoding is trained for (the study's
max_position_embeddings; two tokens per point); one value (a list of one is read as it).
Everything else in the model block is refused by name (one line).
"""

from __future__ import annotations

import dataclasses

from src.flags import UsageError
from src.mixer_spec import mixer_of
from src.models.sequence_presets import llama, mamba

COMMON = {
    "type",
    "family",
    "max_length",
    "hidden_size",
    "num_hidden_layers",
    "dense_layout",
}  # ours: flat | batched (src/models/sequence.py)
LLAMA_KEYS = COMMON | {
    "num_attention_heads",
    "hidden_act",
    "rope_theta",
    "intermediate_size",
    "rms_norm_eps",
    "position",
    "position_kwargs",
    "attention_type",
    "attention_kwargs",
    "attention_types",
}
MAMBA_KEYS = COMMON | {"state_size", "expand", "conv_kernel", "time_step_rank", "layer_norm_epsilon"}
# our settings' paths in the base_model's names, for refusals
OURS_TO_BACKBONE = {
    "model.width": "model.hidden_size",
    "model.n_layer": "model.num_hidden_layers",
    "model.n_head": "model.num_attention_heads",
    "model.max_tokens": "model.max_length",
    "model.position.options": "model.position_kwargs",
    "model.seq_mixer.options": "model.attention_kwargs",
    "model.seq_mixer": "model.attention_type",
    "model.seq_mixers": "model.attention_types",
}


def hybrid_mapping(model: dict, seq_mixer: dict) -> list | None:
    """model.attention_types (ours) as our `seq_mixers`: a list of names, `name:option=value`
    spellings (src.mixer_spec) or {name, options}; an entry naming the model's seq_mixer takes its
    options (None: no such key)."""
    if "attention_types" not in model:
        return None
    layers = model["attention_types"]
    if not isinstance(layers, list):
        raise UsageError(f"model.attention_types={layers!r} is not accepted; accepted: a list of mixer names")
    return [
        seq_mixer
        if item == seq_mixer["name"]
        else mixer_of(item, "model.attention_types").to_dict()
        if isinstance(item, str) and ":" in item
        else item
        for item in layers
    ]


def _int(model: dict, key: str, default=None, low: int = 1) -> int:
    value = model.get(key, default)
    if value is None:
        raise UsageError(f"model.{key}: missing; accepted: an integer >= {low} (family {model['family']})")
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise UsageError(f"model.{key}={value!r} is not accepted; accepted: an integer >= {low}")
    return value


def _number(model: dict, key: str, default: float) -> float:
    value = model.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise UsageError(f"model.{key}={value!r} is not accepted; accepted: a number > 0")
    return float(value)


def _max_tokens(model: dict, points_end) -> int:
    """The trained tokens of the position encoding: max_length, else two per trained point."""
    value = model.get("max_length")
    if isinstance(value, list):
        if len(value) != 1:  # several: runners.train makes one run per length before this
            raise UsageError(f"model.max_length={value!r} is not accepted; accepted: one length")
        value = value[0]
    if value is None or value in ("inf", float("inf")):
        return 2 * points_end if isinstance(points_end, int) else 2
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise UsageError(f'model.max_length={value!r} is not accepted; accepted: an integer >= 2 or "inf"')
    return value


def _mamba_model(model: dict) -> dict:
    """The `mamba` preset's mapping with the block's sizes and ε."""
    preset = dataclasses.asdict(mamba())
    rank = model.get("time_step_rank", "auto")
    mixer = preset["seq_mixer"]["options"]
    mixer.update(
        state_size=_int(model, "state_size", mixer["state_size"]),
        expand=_int(model, "expand", mixer["expand"]),
        conv_kernel=_int(model, "conv_kernel", mixer["conv_kernel"]),
        dt_rank=0 if rank == "auto" else _int(model, "time_step_rank"),
    )
    norm = preset["norm"]["options"]
    norm["eps"] = _number(model, "layer_norm_epsilon", norm["eps"])
    return preset


def _llama_model(model: dict) -> dict:
    """The `llama` preset's mapping with the block's heads, ε, intermediate size and encoding."""
    from src.registry import registry

    if model.get("hidden_act", "silu") != "silu":
        raise UsageError(f"model.hidden_act={model['hidden_act']!r} is not accepted; accepted: silu (SwiGLU)")
    preset = dataclasses.asdict(llama())
    width = model["hidden_size"]
    ratio = preset["state_mixer"]["options"]["hidden_ratio"]
    position = model.get("position", preset["position"]["name"])
    position_options = model.get("position_kwargs") or {}
    if not isinstance(position_options, dict):
        raise UsageError(f"model.position_kwargs={position_options!r} is not accepted; accepted: a mapping")
    position_options = dict(position_options)
    takes_theta = position in registry("position") and "theta" in {
        f.name for f in dataclasses.fields(registry("position").get(position).options)
    }
    if "rope_theta" in model and takes_theta:  # rope, yarn, dynamic_yarn: the rotary base
        position_options.setdefault("theta", _number(model, "rope_theta", 10_000.0))
    norm = preset["norm"]["options"]
    norm["eps"] = _number(model, "rms_norm_eps", norm["eps"])
    preset["state_mixer"]["options"]["hidden_ratio"] = _int(model, "intermediate_size", round(ratio * width)) / width
    preset.update(n_head=_int(model, "num_attention_heads"), position={"name": position, "options": position_options})
    if "attention_type" in model or "attention_kwargs" in model:
        options = model.get("attention_kwargs") or {}
        if not isinstance(options, dict):
            raise UsageError(f"model.attention_kwargs={options!r} is not accepted; accepted: a mapping")
        preset["seq_mixer"] = {"name": model.get("attention_type", preset["seq_mixer"]["name"]), "options": options}
    layers = hybrid_mapping(model, preset["seq_mixer"])
    if layers is not None:
        preset["seq_mixers"] = layers
    return preset


BACKBONES = {  # family -> (its type, the keys it accepts, its model mapping)
    "Llama2": ("decoder", LLAMA_KEYS, _llama_model),
    "Mamba": ("ssm", MAMBA_KEYS, _mamba_model),
}


def backbone_model(model: dict, dims_end, points_end) -> dict:
    """Our model mapping (preset llama or mamba) of a base_model block."""
    family = model["family"]
    kind, accepted, build = BACKBONES[family]
    extra = sorted(set(model) - accepted)
    if extra:
        raise UsageError(f"model.{extra[0]}: unknown key for family {family}; accepted: {', '.join(sorted(accepted))}")
    if model.get("type", kind) != kind:
        raise UsageError(f"model.type={model['type']!r} is not accepted; accepted: {kind} (family {family})")
    sizes = {
        "width": _int(model, "hidden_size"),
        "n_layer": _int(model, "num_hidden_layers"),
        "n_dims": dims_end,
        "max_tokens": _max_tokens(model, points_end),
    }
    layout = {"dense_layout": model["dense_layout"]} if "dense_layout" in model else {}
    return {**build(model), **sizes, **layout}
