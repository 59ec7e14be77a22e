"""The operator's applications: the `aci-evidence` console script and what it runs on top of
the library (the demo, the pipeline benchmark, status rendering, the replay commands).

Library code below this layer takes typed arguments; only this layer parses a command line.
"""
