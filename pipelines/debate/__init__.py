"""``debate``: N debaters over R rounds in a chosen topology, a judge decides; consensus measured."""
