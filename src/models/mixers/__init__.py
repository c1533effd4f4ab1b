"""Every sequence mixer (registry "seq_mixer"), one module per family, found by
src.registry.load_entries like every module of src.models. By kind:

  the mixer kit            kit.py: register_mixer, state_floats, projections, masks, dropout
  attention family         attention.py: softmax_causal, local, local_global, mqa, rela
  linear attention,        linear_attention.py: favor, rebased, linear (limits_of_icl's kernels);
  kernels, delta rules     gated_linear_attention.py: linear_attention, gated_linear_attn (the ICL
                           benchmark's); based.py; delta_rule.py: delta_net, gated_delta_net; rwkv7.py
  convolutions             convolutions.py: short_conv, base_conv; gated_convolutions.py: hyena, h3
  recurrent, state space   lstm.py; mamba.py: mamba; mamba2.py: mamba2

A new mixer is one module here that calls kit.register_mixer; its tests come from the generic
ones (tests/test_registry_entries.py: every entry of every registry) with no edit.
"""
