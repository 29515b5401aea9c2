"""The scaling study: one command that runs the same sweep on each config variant
(1x, 2x, 4x ...), searches the latency target, and says how many GPUs are worth paying for."""
