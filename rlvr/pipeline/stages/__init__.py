"""One module per DVC stage: `run(params, [name,] paths)` loads the stage's inputs, calls the
library, writes its outputs and logs to MLflow. `rlvr.pipeline.run` dispatches to them."""
