"""load.transport = system_shm: the inputs in a POSIX shared-memory segment the server maps, each
request a small JSON body naming it (engine/triton/shm.py). Sent as the http transport sends."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.triton.transports import Prepared, SweepInputs
from engine.triton.transports.http import HttpTransport, server_endpoint

if TYPE_CHECKING:
    from engine.triton.shm import CudaPlace


class SystemShmTransport(HttpTransport):
    async def prepare(self, sweep: SweepInputs) -> Prepared:
        return await prepare_shm(self, sweep, None)


async def prepare_shm(transport: HttpTransport, sweep: SweepInputs, gpu: CudaPlace | None) -> Prepared:
    """Open the sweep's regions (the inputs on ``gpu``, or in system shared memory) and encode the
    requests that name them; the regions go when the sweep ends, or now if encoding fails. With
    validation data the outputs stay in the answers, where each answer's own values are (one
    output region is shared by every request in flight)."""
    from engine.triton.request import output_sizes  # numpy: the session's side only
    from engine.triton.shm import open_regions

    server_endpoint(sweep)  # a bad URL is the user's error before any region is made
    target = sweep.target
    tensors = [[(t["name"], blob) for t, blob in r.tensors] for r in sweep.requests]
    outputs = [] if sweep.validating else output_sizes(sweep.info, sweep.batch_size)
    regions = await open_regions(target.http_url, target.headers, tensors, outputs, gpu)
    try:
        return transport.prepared(sweep, regions.plan, regions.close)
    except BaseException:
        await regions.close()
        raise


TRANSPORT = SystemShmTransport()
