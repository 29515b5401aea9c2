"""Pure pieces of the streaming transports: when a gRPC stream's response counts as arrived (the
kernel's receive time, else when the loop's select returned in the pass that reads it, bounded
by the write and now), and an SSE event's JSON values as the raw
bytes validation data holds."""

from __future__ import annotations

import struct
import time
from types import SimpleNamespace

from engine.net.stamped_socket import arrival
from engine.triton.transports.generate_stream import raw_of


def test_a_response_arrived_when_the_loop_woke_for_it() -> None:
    written = time.monotonic_ns() - 5_000_000
    woke = written + 1_000_000
    assert arrival(None, SimpleNamespace(returned=woke), written) == woke


def test_the_kernels_receive_time_comes_first() -> None:
    written = time.monotonic_ns() - 5_000_000
    kernel, woke = written + 1_000_000, written + 3_000_000
    assert arrival(SimpleNamespace(arrived_ns=kernel), SimpleNamespace(returned=woke), written) == kernel
    assert arrival(SimpleNamespace(arrived_ns=0), SimpleNamespace(returned=woke), written) == woke  # none: the wake


def test_never_before_the_write_nor_after_now() -> None:
    written = time.monotonic_ns() - 5_000_000
    assert arrival(None, SimpleNamespace(returned=written - 1_000_000), written) == written  # woke before this request's write
    before = time.monotonic_ns()
    late = arrival(None, SimpleNamespace(returned=before + 10**12), written)  # a stamp from the future: now
    assert before <= late <= time.monotonic_ns()


def test_without_the_workers_selector_the_clock_now() -> None:
    before = time.monotonic_ns()
    for selector in (None, SimpleNamespace(returned=0)):
        stamp = arrival(None, selector, 0)
        assert before <= stamp <= time.monotonic_ns()


def test_event_values_as_raw_bytes() -> None:
    assert raw_of("one", "BYTES") == b"\x03\x00\x00\x00one"
    assert raw_of(["a", "bc"], "BYTES") == b"\x01\x00\x00\x00a\x02\x00\x00\x00bc"
    assert raw_of(7, "INT32") == struct.pack("<i", 7)
    assert raw_of([1.5, -2.0], "FP32") == struct.pack("<2f", 1.5, -2.0)
    assert raw_of(True, "BOOL") == b"\x01"


def test_a_value_that_is_not_of_its_datatype_is_none() -> None:
    assert raw_of("seven", "INT32") is None
    assert raw_of(1 << 40, "INT32") is None
    assert raw_of(1.0, "BF16") is None
