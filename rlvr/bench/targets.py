"""The targets of every `rlvr bench` workload, read from rlvr/bench/targets.yaml (one data file for all)."""

from __future__ import annotations

from pathlib import Path

import yaml

TARGETS: dict[str, dict] = yaml.safe_load((Path(__file__).parent / "targets.yaml").read_text())
