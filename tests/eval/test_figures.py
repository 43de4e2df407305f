"""saved_figure: a plot file written on success, and no figure left open either way."""

import matplotlib.pyplot as plt
import pytest

from critiquelab.eval.plots import saved_figure


def test_a_drawn_figure_is_saved_and_closed(tmp_path):
    path = tmp_path / "plot.png"
    open_before = len(plt.get_fignums())
    with saved_figure(path, figsize=(3.0, 2.0)) as ax:
        ax.plot([0, 1], [0, 1])
    assert path.read_bytes().startswith(b"\x89PNG")
    assert len(plt.get_fignums()) == open_before


def test_a_plot_that_fails_to_draw_writes_nothing_and_leaks_no_figure(tmp_path):
    path = tmp_path / "plot.png"
    open_before = len(plt.get_fignums())
    with pytest.raises(KeyError), saved_figure(path, figsize=(3.0, 2.0)):
        raise KeyError("pass@1")
    assert not path.exists()
    assert len(plt.get_fignums()) == open_before
