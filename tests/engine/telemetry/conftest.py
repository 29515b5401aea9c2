from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

# Triton's documented GPU metric format (docs/user_guide/metrics.md: per-GPU gauges labelled
# by gpu_uuid; utilization 0.0-1.0, power in W, energy in J since start), two GPUs, plus the
# per-model counters a real server serves next to them.
TRITON_GPU_METRICS = """\
# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="vit_tiny",version="1"} 1234
# HELP nv_energy_consumption GPU energy consumption in joules since the Triton Server started
# TYPE nv_energy_consumption counter
nv_energy_consumption{gpu_uuid="GPU-c06bbf33-c250-ca45-579b-19134b518844"} 3594017.400000
nv_energy_consumption{gpu_uuid="GPU-7f1e2d3c-0000-1111-2222-333344445555"} 2000.5
# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid="GPU-c06bbf33-c250-ca45-579b-19134b518844"} 0.870000
nv_gpu_utilization{gpu_uuid="GPU-7f1e2d3c-0000-1111-2222-333344445555"} 0.000000
# HELP nv_gpu_memory_total_bytes GPU total memory, in bytes
# TYPE nv_gpu_memory_total_bytes gauge
nv_gpu_memory_total_bytes{gpu_uuid="GPU-c06bbf33-c250-ca45-579b-19134b518844"} 42949672960.000000
nv_gpu_memory_total_bytes{gpu_uuid="GPU-7f1e2d3c-0000-1111-2222-333344445555"} 42949672960.000000
# HELP nv_gpu_memory_used_bytes GPU used memory, in bytes
# TYPE nv_gpu_memory_used_bytes gauge
nv_gpu_memory_used_bytes{gpu_uuid="GPU-c06bbf33-c250-ca45-579b-19134b518844"} 33763098624.000000
nv_gpu_memory_used_bytes{gpu_uuid="GPU-7f1e2d3c-0000-1111-2222-333344445555"} 1048576.000000
# HELP nv_gpu_power_usage GPU power usage in watts
# TYPE nv_gpu_power_usage gauge
nv_gpu_power_usage{gpu_uuid="GPU-c06bbf33-c250-ca45-579b-19134b518844"} 251.091000
nv_gpu_power_usage{gpu_uuid="GPU-7f1e2d3c-0000-1111-2222-333344445555"} 51.5
# HELP nv_gpu_power_limit GPU power management limit in watts
# TYPE nv_gpu_power_limit gauge
nv_gpu_power_limit{gpu_uuid="GPU-c06bbf33-c250-ca45-579b-19134b518844"} 400.000000
nv_gpu_power_limit{gpu_uuid="GPU-7f1e2d3c-0000-1111-2222-333344445555"} 400.000000
"""


@dataclass
class MetricsServer:
    url: str
    body: str = ""
    status: int = 200
    requests: list[dict[str, str]] = field(default_factory=list)  # headers of each request


@pytest.fixture
def metrics_server() -> Iterator[MetricsServer]:
    """A real HTTP endpoint on loopback serving whatever text the test sets."""
    state = MetricsServer(url="")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            state.requests.append(dict(self.headers))
            body = state.body.encode()
            self.send_response(state.status)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(2)


@pytest.fixture
def closed_port_url() -> str:
    """A loopback URL where nothing listens (connection refused at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/metrics"
