"""The I/O floor: files (atomic writes, damaged-input errors) and what git says of the checkout.

Above the maths, below the report: the report, the pipeline and the CLI read and write through it;
the maths (`rlvr/*.py`) never does. Nothing here starts DVC or opens an MLflow store.
"""
