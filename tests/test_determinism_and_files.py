"""Process set-up: seeds, threads and deterministic ops, without loading the compiler."""

import subprocess
import sys


def test_set_determinism_turns_on_deterministic_ops_without_importing_the_compiler():
    code = (
        "import sys, torch; from rlvr.pipeline.determinism import set_determinism; set_determinism(3, 1); "
        "print(torch.are_deterministic_algorithms_enabled(), torch.get_num_threads(), "
        "'torch._inductor.config' in sys.modules, torch.initial_seed())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["True", "1", "False", "3"]
