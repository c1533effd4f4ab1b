"""File formats of the originals' configs, read into Settings: limits_of_icl's YAML
(limits_of_icl.py) with the length study's layout (length_study.py) and its Hugging Face backbones
(backbones.py). Formats, not command lines: the dialects (src/cli/) and the studies read them.
"""
