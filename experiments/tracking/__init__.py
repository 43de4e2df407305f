"""MLflow: the store (:mod:`critiquelab.experiments.tracking.store`), one trace per problem
(:mod:`critiquelab.experiments.tracking.traces`), what a run logs
(:mod:`critiquelab.experiments.tracking.run_records`) and its provenance."""
