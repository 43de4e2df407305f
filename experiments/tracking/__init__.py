"""MLflow: the store (:mod:`experiments.tracking.store`), one trace per problem
(:mod:`experiments.tracking.traces`), what a run logs (:mod:`experiments.tracking.run_records`)
and its provenance."""
