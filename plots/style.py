"""The one figure style: white background, no pyplot (no global figure state), PNG bytes
without version metadata (the same figure gives the same bytes). A leaf module (matplotlib
only), so analyses, figure templates and the reproduction's figures all draw with it.
"""
from __future__ import annotations

import io
import textwrap

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

DPI = 110


def new_figure(width: float, height: float, constrained: bool = False) -> Figure:
    """A white Figure on the Agg backend, `width` x `height` inches."""
    return Figure(figsize=(width, height), facecolor="white",
                  layout="constrained" if constrained else None)


def png_bytes(figure: Figure) -> bytes:
    """The figure as PNG bytes: white background, no version metadata."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, facecolor="white", metadata={"Software": None})
    return buffer.getvalue()


def wrapped_title(figure: Figure, *lines: str, fontsize: int = 9) -> None:
    """A suptitle whose lines are wrapped to the figure's width."""
    width = max(40, int(figure.get_size_inches()[0] * 13))
    figure.suptitle("\n".join(textwrap.fill(line, width) for line in lines if line),
                    fontsize=fontsize)
