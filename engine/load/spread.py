"""A level spread over a sweep's endpoints (servers), as arithmetic: which load worker serves which
endpoint (worker w to endpoint w mod N, for the whole sweep), how many workers a level uses (a
multiple of N), and how a concurrency level's connections split, first over the endpoints (each
within one of an even share), then over that endpoint's workers. Pure; the endpoints themselves
(URLs, checks) are the server API's (engine/triton/endpoints.py for Triton).
"""

from __future__ import annotations

import math


def endpoint_of_worker(worker: int, endpoints: int) -> int:
    return worker % endpoints


def workers_multiple(workers: int, endpoints: int, most: int | None = None) -> int:
    """``workers`` rounded up to a multiple of ``endpoints`` (at least one each), never past ``most``
    (itself a multiple)."""
    n = max(1, math.ceil(workers / endpoints)) * endpoints
    return min(n, most) if most is not None else n


def even_split(total: int, parts: int) -> list[int]:
    """``total`` in ``parts`` integers that differ by at most one and sum to it."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def connections_per_worker(total: int, endpoints: int, workers: int) -> list[int]:
    """A concurrency level's connections per worker: over the endpoints first, then over each
    endpoint's workers (``workers`` is a multiple of ``endpoints``)."""
    if workers % endpoints:
        raise ValueError("workers must be a multiple of the endpoints")
    per_endpoint = even_split(total, endpoints)
    each = workers // endpoints
    out = [0] * workers
    for e, n in enumerate(per_endpoint):
        for j, share in enumerate(even_split(n, each)):
            out[e + j * endpoints] = share
    return out


def per_endpoint(values: list[int], endpoints: int) -> list[int]:
    """Per-worker counts summed per endpoint."""
    sums = [0] * endpoints
    for w, v in enumerate(values):
        sums[endpoint_of_worker(w, endpoints)] += v
    return sums
