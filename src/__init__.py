"""Core of the workbench: settings, data, curricula, models, training, run directories.

One JAX setting is fixed here, because every entry point imports this package
before drawing a random number: the classic (non-partitionable) threefry bit
layout. It is the same threefry generator, but on CPU it draws our task batches
about 7x faster than the sharding-friendly layout that recent JAX uses by default
(8.5 -> 1.2 ms per 2048 tasks; scripts/bench.py). Fixing it in one place keeps
every random stream (training batches, eval sets, analyses) identical across
entry points.
"""
import jax

jax.config.update("jax_threefry_partitionable", False)
