"""Zoology's sequence mixers, one module per kind (registry "seq_mixer"; found by
src.registry.load_entries like every module of src.models)."""
