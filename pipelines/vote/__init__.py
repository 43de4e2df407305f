"""``vote``: k samples, the answer chosen by agreement on the visible examples, by their expected
values, or by CodeT's dual agreement with generated tests
(:mod:`critiquelab.pipelines.vote.generated_tests`)."""
