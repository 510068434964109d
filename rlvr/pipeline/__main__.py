import logging
import os
import sys

if __name__ == "__main__":  # not when a worker process imports this module
    from rlvr.pipeline.run import main

    code = main(sys.argv[1:])
    # Leave without the interpreter's teardown: unloading torch and MLflow takes 1-3 s a process and
    # does nothing a finished stage needs. By now every output is written and renamed into place,
    # every MLflow run ended and committed, every worker joined; what remains buffered is flushed here.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
