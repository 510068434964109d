"""What DVC says about the checkout, asked through its command line (DVC has no public Python API
for these): the experiments table."""

from __future__ import annotations

import json
import subprocess
import sys

from rlvr.fields import UserError


def experiments() -> list:
    """`dvc exp show --json` of the checkout in the working folder: every experiment's params and
    metrics; one line naming DVC's own error when it fails."""
    command = [sys.executable, "-m", "dvc", "exp", "show", "--json"]
    shown = subprocess.run(command, capture_output=True, text=True)
    if shown.returncode != 0:
        raise UserError(f"dvc exp show failed: {(shown.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(shown.stdout)
