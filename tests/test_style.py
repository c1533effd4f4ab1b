"""plots/style.py, the one figure style: a leaf module, panels and colours every figure shares."""

import ast
from pathlib import Path

import numpy as np

from plots.style import axes_grid, line_colors, model_colors, new_figure, panels, png_bytes, wrapped_title

ROOT = Path(__file__).resolve().parents[1]


def test_style_is_a_leaf_module():
    tree = ast.parse((ROOT / "plots" / "style.py").read_text())
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    imported |= {
        node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported <= {"__future__", "io", "math", "os", "sys", "textwrap", "typing", "matplotlib", "numpy"}


def test_panels_hide_the_unused_cells_and_size_the_figure():
    figure = new_figure(6, 4, constrained=True)
    axes = panels(figure, 4)
    assert len(axes) == 4 and len(figure.axes) == 6  # 2 rows of 3, 2 hidden
    assert [ax.get_visible() for ax in figure.axes].count(False) == 2
    assert np.allclose(figure.get_size_inches(), (4.8 * 3, 3.9 * 2 + 0.8))
    assert axes_grid(new_figure(4, 4), 2, 3).shape == (2, 3)


def test_colours_are_stable_and_distinct():
    assert model_colors(["a", "b"]) == {"a": "#1f77b4", "b": "#ff7f0e"}
    assert model_colors(["b", "a"])["b"] == "#1f77b4"  # by position, not by name
    colours = line_colors(12)
    assert len(set(colours[:10])) == 10 and colours[10] == colours[0]


def test_wrapped_title_wraps_to_the_figure_width():
    figure = new_figure(4, 3)
    wrapped_title(figure, "word " * 40, "second line")
    text = figure._suptitle.get_text()
    assert text.count("\n") >= 3 and text.endswith("second line")
    assert max(len(line) for line in text.splitlines()) <= 52  # 4 inches x 13 characters
    assert png_bytes(figure)[:4] == b"\x89PNG"
