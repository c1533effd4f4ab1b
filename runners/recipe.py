"""The ICL benchmark's recipe (task x sequence mixer x state mixer, accuracy): the original's
`uv run recipe.py ...` as `python -m runners.recipe ...` (see src/cli/recipe.py).

    python -m runners.recipe --choices
    python -m runners.recipe task:mqar model.seq_mixer:attention model.state_mixer:mlp --help
    python -m runners.recipe wandb:None task:mqar model.seq_mixer:attention model.state_mixer:mlp
"""

import sys

from src.cli.recipe import main  # noqa: F401 - runners.recipe.main(argv)

if __name__ == "__main__":
    from src.process import guarded

    sys.exit(guarded(main))
