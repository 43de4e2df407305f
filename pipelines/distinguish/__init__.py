"""``distinguish``: the greedy answer checked against samples on model-written inputs that tell
programs apart, chosen by a pairwise judge (S*), by CodeT-style agreement, or by both."""
