"""What a person runs, beside the pipeline DVC runs: `rlvr verify` (and `--rerun`), `rlvr starts`,
`rlvr calibrate`, `rlvr ui`, `rlvr restore`. These may import the pipeline (`rlvr.pipeline`), never
the reverse, and no stage reaches them: changing one reruns nothing."""
