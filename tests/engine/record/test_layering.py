import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_record_modules_import_without_the_tui_stack() -> None:
    """The GPU box has no textual or tritonclient: engine.record must not need them."""
    modules = sorted(f"engine.record.{p.stem}" for p in (REPO / "engine" / "record").glob("*.py") if p.stem != "__init__")
    modules += ["engine.analysis.bottleneck", "engine.analysis.gates", "engine.analysis.saturation",
                "engine.analysis.sweep_summary"]
    code = (
        "import sys, importlib\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'tritonclient', 'tui', 'rich', 'torch'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
