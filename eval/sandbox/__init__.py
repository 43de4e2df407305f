"""The sandbox behind ``critiquelab.eval.execution`` (issue #3).

- ``codec``: the plain-data value format and framing; the only thing crossing the boundary.
- ``limits``: resource limits for candidate processes.
- ``isolation``: which isolation level this machine supports and how to launch at it.
- ``server``: the fork server running inside the sandbox (untrusted side; stdlib only).
- ``output_sink``: the server's drain for the candidate's stdout/stderr (counted, discarded).
- ``checker``: the trusted process that runs the test's asserts against a proxy.
- ``pool``: harness-side lanes (one checker + one sandbox each) and their shutdown.
"""
