"""Core of the workbench: settings, data, curricula, models, training, run directories.

Two JAX settings are fixed here, because every entry point imports this package
before it draws a random number or compiles a program:

- the classic (non-partitionable) threefry bit layout. It is the same threefry
  generator, but on CPU it draws our task batches about 7x faster than the
  sharding-friendly layout that recent JAX uses by default (8.5 -> 1.2 ms per 2048
  tasks; scripts/bench/training.py). Fixing it in one place keeps every random stream
  (training batches, eval sets, analyses) identical across entry points and backends.
- float32 matrix products in full float32 ("highest"). A CPU computes them so anyway;
  a GPU would otherwise round their inputs to TF32 (10 mantissa bits): on an H100,
  nine NumPy-reference tests (attention mechanisms, GD++, the copy model's
  factorised attention) then miss their 1e-4 tolerances, and all pass with it.
  JAX_DEFAULT_MATMUL_PRECISION in the environment wins (e.g. =tensorfloat32 for speed).
"""

import os

import jax

jax.config.update("jax_threefry_partitionable", False)
if "JAX_DEFAULT_MATMUL_PRECISION" not in os.environ:
    jax.config.update("jax_default_matmul_precision", "highest")
