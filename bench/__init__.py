"""Benchmarks (`rlvr bench`, figures in reports/benchmarks.json) and the peers they are measured
against (`peer`: TRL and Hugging Face `generate`). Apart from the library: nothing in `rlvr`
imports them, and no stage depends on them."""
