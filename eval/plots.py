"""One headless matplotlib figure per plot file: the backend, size, resolution and clean-up the
report's plots share.

matplotlib is imported when a plot is drawn, not when this module is, because most commands draw
nothing and the import is slow; the Agg backend draws without a display (servers, CI, Ray nodes).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.axes import Axes

DPI = 110


@contextmanager
def saved_figure(path: Path, figsize: tuple[float, float]) -> Iterator[Axes]:
    """The axes of a new figure to draw on; once the block ends the figure is laid out and saved
    to ``path``. It is closed either way, so a plot that fails to draw leaks no figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=figsize)
    try:
        yield ax
        fig.tight_layout()
        fig.savefig(path, dpi=DPI)
    finally:
        plt.close(fig)
