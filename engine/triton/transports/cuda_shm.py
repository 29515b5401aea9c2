"""load.transport = cuda_shm: the inputs in the memory of the model's first GPU, which the server
opens through a CUDA IPC handle (engine/triton/shm.py says why one GPU). Sent as http sends."""

from __future__ import annotations

from engine.errors import UserError
from engine.triton.transports import Prepared, SweepInputs
from engine.triton.transports.http import HttpTransport
from engine.triton.transports.system_shm import prepare_shm


class CudaShmTransport(HttpTransport):
    async def prepare(self, sweep: SweepInputs) -> Prepared:
        if not sweep.gpus:
            raise UserError("load.transport = 'cuda_shm' needs the model on a GPU: this config variant has no GPU instance")
        from engine.triton.shm import cuda_place

        return await prepare_shm(self, sweep, cuda_place(sweep.gpus, sweep.server_gpu))


TRANSPORT = CudaShmTransport()
