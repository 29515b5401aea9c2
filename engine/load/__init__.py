"""Load engine: closed-loop concurrency and open-loop request-rate sweeps against Triton.

Public entry points: ``engine.load.target`` (Target, TargetInfo, describe_target) and
``engine.load.sweep`` (run_sweep). Kept import-free: load worker processes import submodules of
this package and must not pay for anything they do not use.
"""
