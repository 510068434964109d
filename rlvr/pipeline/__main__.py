import logging
import os
import sys


def run_and_exit(argv: list[str]) -> None:
    """Run the stage `argv` in this process, then leave without the interpreter's teardown: unloading
    torch and MLflow takes 1-3 s a process and does nothing a finished stage needs. By then every
    output is written and renamed into place, every MLflow run ended and committed, every worker
    joined; what remains buffered is flushed here."""
    from rlvr.pipeline.run import main

    code = main(argv)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # not when a worker process imports this module
    from rlvr.pipeline import warm

    argv = sys.argv[1:]
    if warm.enabled():  # under dvc: fork the stage from a process that has torch and MLflow loaded
        if argv[:1] == ["check"]:  # the guard, first in every repro, loads neither: it runs here
            warm.prestart()
        elif (code := warm.run_warm(argv)) is not None:
            os._exit(code)
    run_and_exit(argv)
