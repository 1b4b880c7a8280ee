"""Benchmark scripts (run each as `.venv/bin/python benchmarks/<name>.py`). A package so
that the tests can import the Ascend C report's code (`benchmarks.ascendc_report`)."""
