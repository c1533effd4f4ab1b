"""Quick heatmaps of saved attention weights (the original's command; the analysis lives in
analysis/attention_heatmap.py, where the pipeline runs it at the end of a run).

    python -m plots.attention_quick --run runs/<exp>
"""

import sys

from analysis.attention_heatmap import attention_figure, main, run

__all__ = ["attention_figure", "main", "run"]

if __name__ == "__main__":
    from src.process import guarded

    sys.exit(guarded(main))
