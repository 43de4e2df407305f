"""Names written by researchers become file names inside the data directory, whatever they are."""

from critiquelab.experiments.paths import path_segment


def test_a_plain_short_name_is_kept_as_it_is():
    assert path_segment("debate_vs_critic-2.v1") == "debate_vs_critic-2.v1"


def test_names_that_sanitise_alike_or_share_a_long_prefix_stay_apart_and_short():
    names = ["a b", "a_b", "a/b", "../a_b", "x" * 100, "x" * 100 + "y", "é" * 100]
    segments = [path_segment(name) for name in names]
    assert len(set(segments)) == len(names)
    assert all(len(s.encode()) <= 89 and s not in (".", "..") and "/" not in s for s in segments)
