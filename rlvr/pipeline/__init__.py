"""The machinery that runs the maths as a DVC pipeline: params.yaml read and checked (`config`),
where every file lives (`paths`), each stage declared once (`specs`) and written out as dvc.yaml
(`dvcfile`), the stages themselves (`stages/`), their MLflow runs (`tracking`), checkpoints, seed
workers (`seeds`) and the guards that keep a failing stage from leaving half its outputs; and
the tools on what it ran: `rlvr verify` (`verify`) and the MLflow UI (`ui`).

    python -m rlvr.pipeline sft two_digit      # how dvc.yaml runs stage sft@two_digit
"""
