"""A run without Gemini does not pay for the google-genai SDK, nor a batch of images for PyAV (FFmpeg): importing
what a run imports leaves both unloaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_run_and_the_gemini_boundary_import_without_loading_the_sdk_or_ffmpeg():
    """``microstock run``'s modules (the CLI, the flow) and the Gemini modules they reach (models, client,
    describer, batch) load google-genai only where a Gemini request is built or sent (about 0.5 s an import),
    and PyAV only where a clip is read (0.14 s)."""
    modules = ["flows.cli", "flows.stock_batch", "tasks.gemini.models", "tasks.gemini.client",
               "tasks.gemini.describer", "tasks.gemini.batch"]
    script = (f"import sys\nfor m in {modules!r}: __import__(m)\n"
              "print(sorted(m for m in sys.modules\n"
              "             if m.split('.')[0] in ('httpx2', 'av') or m.startswith('google.genai')))")
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", f"loaded: {out.stdout.strip()}"

