"""``architect``: an architect decomposes, developers work in parallel under typed contracts, a reviewer
gates; delegations form a session tree."""
