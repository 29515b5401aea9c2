"""bench.common.CpuAwake: the CPU latency request it holds, and its one-line refusal."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from bench.common import CpuAwake


def _requested_us() -> int:
    with open(CpuAwake.PATH, "rb") as f:  # reading gives the latency the kernel now honours
        return int.from_bytes(f.read(4), sys.byteorder)


@pytest.mark.skipif(not os.access(CpuAwake.PATH, os.W_OK), reason="needs /dev/cpu_dma_latency writable (Linux, root)")
def test_held_at_zero_while_open_and_released_after() -> None:
    before = _requested_us()
    if before == 0:
        pytest.skip("another process holds the CPUs awake already")
    with CpuAwake():
        assert _requested_us() == 0
    assert _requested_us() == before


def test_a_box_without_it_gets_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CpuAwake, "PATH", str(tmp_path / "no_such_device"))
    with pytest.raises(OSError) as caught:
        CpuAwake().__enter__()
    assert str(caught.value) == (f"cannot hold {tmp_path / 'no_such_device'} at 0: No such file or directory"
                                 " (it needs Linux and root)")
