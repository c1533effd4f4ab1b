"""Benchmarks and timings (make bench; their records under report/measurements/): the training step
of every system against its physical floor (training.py, dynamics.py, mechanisms.py, recipe.py,
paper_cell.py), ours beside the originals' own code (compare_originals.py), and a command's wall time
and memory recorded for the docs (record_timing.py, laptop_lengthgen.py)."""
