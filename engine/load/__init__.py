"""Load engine: closed-loop concurrency and open-loop request-rate sweeps, and their measurement
(levels, ticks, windows, trials, audit, the worker pool). Its rooms' neighbours: engine/net (the
sockets and framings) and engine/triton (Triton's KServe v2 API: the target, requests, answers,
transports), which this room reaches through its server-API seam.

Public entry point: ``engine.load.sweep`` (run_sweep); a target is ``engine.triton.target``'s
(Target, TargetInfo, describe_target). Kept import-free: load worker processes import submodules
of this package and must not pay for anything they do not use.
"""
