"""``critiquelab view``: a read-only web viewer of runs, problems and what the agents did."""
