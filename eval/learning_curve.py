"""Learning curves: cumulative pass@1 against the problem's position in the run.

A pipeline with memory can only improve on later problems, so its curve (against the same
pipeline without memory) shows whether what it learned helped. Each pipeline × seed run solves
the problems in its own order (``order_seed``); the per-problem tables keep that order, and the
curve of a pipeline is the mean over its seeds (orderings), each ordering also drawn thin.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from critiquelab.eval.plots import saved_figure

LEARNING_PLOT = "learning_curve.png"


def learning_curves(problems: pd.DataFrame) -> pd.DataFrame:
    """One row per pipeline × seed × position: ``index`` (1-based, in run order) and
    ``cumulative_pass@1`` over the problems up to it. ``problems`` is the comparison's frame
    (rows of each run in the order it solved them)."""
    rows = []
    for (pipeline, seed), run in problems.groupby(["pipeline", "seed"], sort=True):
        passed = run["passed"].astype(float).reset_index(drop=True)
        cumulative = passed.cumsum() / (passed.index + 1)
        rows.append(pd.DataFrame({"pipeline": pipeline, "seed": seed, "index": passed.index + 1,
                                  "cumulative_pass@1": cumulative}))
    columns = ["pipeline", "seed", "index", "cumulative_pass@1"]
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=columns)


def plot_learning_curves(curves: pd.DataFrame, path: Path) -> Path:
    """The mean curve per pipeline over its orderings (thick) and each ordering (thin)."""
    from matplotlib.ticker import MaxNLocator

    with saved_figure(path, figsize=(6.4, 3.8)) as ax:
        for number, (pipeline, runs) in enumerate(curves.groupby("pipeline", sort=True)):
            color = f"C{number % 10}"
            for _, run in runs.groupby("seed"):
                ax.plot(run["index"], run["cumulative_pass@1"], color=color, alpha=0.25, linewidth=0.8)
            mean = runs.groupby("index")["cumulative_pass@1"].mean()
            orderings = runs["seed"].nunique()
            ax.plot(mean.index, mean.to_numpy(), color=color, linewidth=2,
                    label=f"{pipeline} ({orderings} ordering{'s' if orderings > 1 else ''})")
        ax.set_ylim(0, 1.05)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("problem index in run order")
        ax.set_ylabel("cumulative pass@1")
        ax.set_title("Learning curves")
        ax.legend(fontsize=8, loc="lower right")
    return path


def curve_summary(curves: pd.DataFrame, block: int = 10) -> pd.DataFrame:
    """Per pipeline: mean pass@1 over the first and the last ``block`` positions (all orderings),
    the plot's reading in two numbers."""
    rows = []
    for pipeline, runs in curves.groupby("pipeline", sort=True):
        last = int(runs["index"].max())
        size = min(block, last)
        by_index = runs.groupby("index")["cumulative_pass@1"].mean()
        first_rate = by_index.loc[size]
        total = by_index.loc[last] * last  # mean passed count over the first `last` problems
        before = by_index.loc[last - size] * (last - size) if last > size else 0.0
        rows.append({"pipeline": pipeline, "problems": last, "block": size,
                     "pass@1_first_block": first_rate, "pass@1_last_block": (total - before) / size})
    return pd.DataFrame(rows)
