"""Triton's KServe v2 API and only it: the target and its metadata, the server's statistics,
tensors and requests, answer checks, shared memory, and the transports that encode KServe requests."""
