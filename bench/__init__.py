"""Benchmarks, each against its anchor in one run: ``python -m bench --help`` lists the stages."""
