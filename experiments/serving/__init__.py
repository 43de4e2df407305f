"""Serving the LM: bundled model files, the local server and its build, the DSPy LM client with its
cache, and per-role models (provisioned for a run, stopped after it)."""
