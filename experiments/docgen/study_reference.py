"""The result-files reference: what a study folder holds, read from the study format's own
models (:mod:`critiquelab.experiments.studies.files`), so the page says what ``load_study`` checks."""

from __future__ import annotations

import inspect
import textwrap

from critiquelab.experiments.docgen.markdown import generated_note
from critiquelab.experiments.docgen.spec_reference import spec_section


def study_files_page() -> str:
    from critiquelab.experiments.studies import files

    intro, _, rest = (inspect.getdoc(files) or "").partition("::")
    tree, _, after = rest.strip("\n").partition("\n\n")
    required = ", ".join(f"`{column}`" for column in files.OUTCOME_COLUMNS)
    return "\n".join([
        "# Result files (studies)\n",
        generated_note("the study format (`critiquelab.experiments.studies.files`)"),
        intro.strip() + "\n",
        f"```text\n{textwrap.dedent(tree)}\n```\n",
        after.strip() + "\n",
        "Write one with `critiquelab run SPEC --study studies/NAME --evidence held_out` or "
        "`critiquelab study write RUN_ID --out studies/NAME --evidence …`; `critiquelab study check` "
        "verifies one; `critiquelab compare studies/NAME` and "
        "`critiquelab rescore studies/NAME --dataset FILE` re-analyse it from its files alone, and "
        "`critiquelab.experiments.studies.read.load_study` loads it as a "
        "DataFrame. Every check failure is one line, exit 2.\n",
        "## outcomes.jsonl\n\nOne JSON object per line: one arm × seed × problem. Some columns are "
        "required (below); the others are the run's per-problem table as logged (`status`, `reason`, "
        "`detail`, `iterations`, `cached_lm_calls`, `latency_s`, `parsed`, `isolation`, `messages`) "
        "and the arm's own figures as `extra.<figure>` (see the [pipeline reference](pipelines.md)); "
        "`usage_by_role` (tokens per role) and `tokens_by_model` (the same summed per model that "
        f"answered each role) are objects. Required: {required}.\n",
        spec_section("manifest.json", "manifest", files.StudyManifest,
                     "Provenance and checksums; `schema` names the format version."),
        spec_section("runs.json", "runs", files.RecordedRun,
                     "A list: the experiment (parent) runs first, then one per arm × seed."),
    ])
