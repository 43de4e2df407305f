"""The agent runtime the pipelines stand on: agents reacting to messages on the pool, role calls
and their per-role models, memory and the shared scratchpad.

:mod:`.pool` the message pool and its stores; :mod:`.agents` agents and their task context;
:mod:`.role_call` a role's predictor called and traced; :mod:`.memory` memory across tasks;
:mod:`.scratchpad` shared channels whose every change is an event on the pool. Nothing here knows
a pipeline or the pipeline registry (``tests/test_layering.py``).
"""
