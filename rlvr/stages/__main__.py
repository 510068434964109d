import logging
import os
import sys

from rlvr import warm
from rlvr.stages import main

if __name__ == "__main__":  # not when a worker process imports this module
    code = None
    if warm.wanted():  # under DVC: a process forked from the warm-start server runs the stage
        try:
            code = warm.run("rlvr.stages", sys.argv[1:])
        except warm.WarmError as exc:
            print(f"rlvr: note: {exc}; running the stage in this process", file=sys.stderr)
    if code is None:
        code = main()
    # Leave without the interpreter's teardown: unloading torch and MLflow takes 1-3 s a process here
    # (26 processes a pipeline) and does nothing a finished stage needs. By now every output is
    # written and renamed into place, every MLflow run ended and committed, every worker joined;
    # what remains buffered is flushed here.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
