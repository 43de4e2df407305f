"""Shared pieces of the optimiser tests: an LM pointed at a scripted endpoint."""

from __future__ import annotations

import dspy
import pytest


@pytest.fixture
def make_lm():
    def make(api_base: str) -> dspy.LM:
        return dspy.LM("openai/fake", api_base=api_base, api_key="fake", cache=False, num_retries=0)

    return make
