"""The standard code-generation sets on the Hugging Face Hub, by name: their format, the config
and split read by default, and which of their columns hold each field of that format.

With these, ``source: hf://openai/openai_humaneval`` needs neither ``format`` nor ``fields``. Any
other ``hf://`` name loads as well, read like a local file: ``format``/``fields`` from the spec, or
the format detected from its columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from critiquelab.core.errors import UserError


@dataclass(frozen=True)
class HubSet:
    """One known Hub dataset. ``fields`` maps the format's fields to the dataset's columns where
    their names differ (field -> column). A dataset whose configs name their columns differently
    lists them in ``config_fields`` (config -> mapping), read for ``default_config`` unless the
    spec names another; any other dataset's single mapping holds for whatever config is read."""

    name: str
    format: str
    split: str = "test"
    fields: Mapping[str, str] = field(default_factory=dict)
    default_config: str | None = None
    config_fields: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def config(self, requested: str | None) -> str | None:
        """The config to load: the requested one (checked when the configs are known), else the
        default (None: the dataset's own default)."""
        chosen = requested if requested is not None else self.default_config
        if self.config_fields and chosen not in self.config_fields:
            raise UserError(f"dataset 'hf://{self.name}': unknown config '{chosen}'; known: "
                            f"{', '.join(self.config_fields)}")
        return chosen

    def columns(self, config: str | None) -> dict[str, str]:
        """The field -> column mapping of ``config`` (as returned by :meth:`config`)."""
        if config is not None and config in self.config_fields:
            return dict(self.config_fields[config])
        return dict(self.fields)


_SETS = (
    # task_id, prompt, canonical_solution, test, entry_point: HumanEval's own names.
    HubSet("openai/openai_humaneval", "humaneval"),
    # HumanEval's columns; `test` is EvalPlus's check(candidate) over base and plus inputs.
    HubSet("evalplus/humanevalplus", "humaneval"),
    # full: task_id, text, code, test_list, test_setup_code, challenge_test_list;
    # sanitized: task_id, prompt (the task text), code, test_list, test_imports.
    HubSet("google-research-datasets/mbpp", "mbpp", default_config="full",
           config_fields={"full": {}, "sanitized": {"text": "prompt"}}),
    # Sanitized MBPP's columns; `test` is EvalPlus's program over base and plus inputs, calling
    # the function by name: the hidden test, in place of the three asserts of `test_list`.
    HubSet("evalplus/mbppplus", "mbpp", fields={"text": "prompt", "test_program": "test"}),
)
STANDARD_SETS: Mapping[str, HubSet] = MappingProxyType({s.name.lower(): s for s in _SETS})


def known_set(name: str) -> HubSet | None:
    """The registry's entry for a Hub name (Hub names are case-insensitive), else None."""
    return STANDARD_SETS.get(name.lower())
