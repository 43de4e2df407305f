"""What an experiment costs: estimates from measured problems (:mod:`.estimate`) and the costs
of the shipped specs (:mod:`.shipped`)."""
