"""The papers' command-line dialects (one module each: lsa, gpt2, dynamics (the `runners.dynamics`
command), recipe, length_study, backbones, rerun, command): each translates an original's flags or
config files into Settings and calls the pipeline. What every command line shares lives below them:
src/flags.py (flags, one-line errors) and src/process.py (the process guards)."""
