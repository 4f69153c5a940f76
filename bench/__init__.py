"""Benchmarks for countersign (`make bench`, `python -m bench`): not tests, never timed assertions.

Modules: `corpus` (the shared corpus of real tool calls, read in place), `generate` (policies of
any size over the corpus's tools, and the call mix), `cedar` (the same rules and calls for Cedar,
through cedarpy), `load` and `coldload` (load time), `decisions` (decision latency and agreement),
`timing` (percentiles, machine description). Results go to `bench/results/*.json`.
"""
