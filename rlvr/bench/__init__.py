"""Benchmarks (`rlvr bench`, figures in reports/benchmarks.json) and the peers they are measured
against (`peer`: TRL and Hugging Face `generate`). On top of the library, beside the CLI: only
`rlvr bench` imports them, and no stage depends on them."""
