"""A progress bar per pipeline × seed: problems done, pass rate so far, tokens so far."""

from __future__ import annotations

import sys

from critiquelab.eval.results import ProblemResult


class ProgressBar:
    def __init__(self, description: str, total: int, enabled: bool = True) -> None:
        from tqdm import tqdm

        self._passed = 0
        self._done = 0
        self._tokens = 0
        self._bar = tqdm(
            total=total, desc=description, unit="problem", disable=not enabled,
            file=sys.stderr, dynamic_ncols=True, leave=True,
        )

    def update(self, result: ProblemResult) -> None:
        self._done += 1
        self._passed += int(result.passed)
        self._tokens += result.total_tokens
        self._bar.set_postfix(
            {"pass": f"{self._passed / self._done:.0%}", "tokens": f"{self._tokens:,}"},
            refresh=False,
        )
        self._bar.update(1)

    def resumed(self, results: list[ProblemResult]) -> None:
        """Count the problems a resumed run had already done, and show them at once (tqdm redraws
        at most every 0.1 s, so the bar would read 0 until the first new problem ends)."""
        for result in results:
            self.update(result)
        self._bar.refresh()

    def close(self) -> None:
        self._bar.close()
