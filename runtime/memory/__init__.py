"""Memory across tasks: what agents learned on one problem reaches agents on later ones.

:mod:`.config` the typed ``memory:`` option; :mod:`.entries` the episodic memory entry;
:mod:`.episodic` its Chroma store (recall, filters, forget); :mod:`.skills` the skills library
(promotion, confidence, approval); :mod:`.sharing` proposals from one role to the roles that
benefit; :mod:`.bank` opens all three under a data directory; :mod:`.reflection` turns a task's
thread into entries; :mod:`.injection` gives memories to roles through a typed signature field;
:mod:`.consolidation` merges near-duplicates and decays stale entries;
:mod:`critiquelab.pipelines.with_memory` attaches memory to a pipeline and measures reuse and recall quality.
Everything is built from visible signals only: prompts, the agents' own outputs and results on the examples
the prompt shows — never hidden tests.
"""
