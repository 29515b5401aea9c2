"""The memory an input-data file costs, measured: the peak RSS of a process that reads one (VmHWM
less its RSS before the read) stays within the bound engine/triton/input_decode.py states: the
file's bytes and the prepared entries. Python lists of Python floats cost about 15 times the text
(a 100 MB file peaked at 1.5 GB)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
SLACK = 48 << 20  # the interpreter's own churn while decoding (allocator arenas, a piece's numbers)

READER = """
import json, sys
from engine.triton.input_data import read_input_data
from engine.triton.target import TargetInfo

def status(key):
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith(key))

info = TargetInfo(model_config={}, inputs=[{"name": "INPUT0", "datatype": "FP32", "shape": [-1, -1]}],
                  outputs=[], max_batch_size=8)
before = status("VmRSS:")
data = read_input_data(sys.argv[1], info)
print(json.dumps({"before": before, "peak": status("VmHWM:"), "entries": len(data.entries),
                  "prepared": sum(len(t.raw) for e in data.entries for t in e.inputs.values())}))
"""


@pytest.mark.slow
def test_a_file_of_number_lists_costs_what_the_bound_says(tmp_path):
    entries, per_entry = 8, 500_000  # 4 million FP32 values, about 44 MB of text
    rng = np.random.default_rng(0)
    path = tmp_path / "numbers.json"
    with path.open("w") as f:
        f.write('{"data": [')
        for k in range(entries):
            values = ",".join(f"{v:.8f}" for v in rng.random(per_entry))
            f.write(("," if k else "") + f'{{"INPUT0": {{"content": [{values}], "shape": [{per_entry}]}}}}')
        f.write("]}")
    size = path.stat().st_size
    proc = subprocess.run([sys.executable, "-c", READER, str(path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    assert got["entries"] == entries and got["prepared"] == entries * per_entry * 4
    bound = size + got["prepared"] + SLACK
    grew = got["peak"] - got["before"]
    assert grew <= bound, f"peak grew {grew >> 20} MiB for a {size >> 20} MiB file; the bound is {bound >> 20} MiB"
