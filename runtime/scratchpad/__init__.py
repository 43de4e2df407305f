"""The shared scratchpad: named channels agents read and write under access rules, every change
an event on the message pool, so the state at any point is a replay of its events."""
