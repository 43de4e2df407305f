"""Where an experiment's problems are solved: threads in this process (``local``) or worker
processes on a Ray cluster (``ray``). The runner stays the hub: it hands an executor a
:class:`~critiquelab.experiments.executors.job.SolveJob` and the pending problems, and records what comes back
(checkpoints, pool, MLflow) itself."""
