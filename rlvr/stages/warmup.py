"""Stage `warmup@{name}`: the clean epochs that the SFT runs naming this warm-up share.

Its run's rows with their true answers, the first `clean_epochs` of the run's schedule, and the
state after them (weights, AdamW moments, the data-order generator, the curve so far) saved for
`sft@{run}` of every run that names it: runs that differ only in their noise train it once. Its
metrics JSON (steps, final loss, seconds, MLflow run id) links dvc.lock to the MLflow run.
"""

from __future__ import annotations

import time

import torch

from rlvr import checkpoint
from rlvr.config import Params
from rlvr.model import TinyLM
from rlvr.paths import WarmupPaths
from rlvr.pipeline import config_hash
from rlvr.runtime import read_jsonl, set_determinism, thread_budget, write_json
from rlvr.sft import encode_sft, final_loss, warm_up
from rlvr.stages.common import SFT_LOGGED, log_row, run_name, tracked
from rlvr.tokenizer import Tokenizer


def run(params: Params, name: str, paths: WarmupPaths, progress: bool = True) -> dict:
    w = params.warmup(name)
    cfg = params.sft_run(w.run)
    rows = read_jsonl(paths.data.rows)
    set_determinism(params.seed, thread_budget(params.threads))
    tok = Tokenizer()
    with tracked("warmup", name, params, {"task": cfg.task, "seed": params.seed, "sft_run": w.run}) as mlrun:
        gen = torch.Generator().manual_seed(params.seed)  # the data order; the SFT stage continues it
        model = TinyLM(cfg.model or params.model, len(tok))
        clean = encode_sft(rows, tok, field="answer")
        t0 = time.perf_counter()
        opt, curve = warm_up(model, clean, cfg, gen, on_step=log_row(mlrun, SFT_LOGGED), progress=progress)
        seconds = time.perf_counter() - t0
        params_hash = config_hash("warmup", name, params)
        checkpoint.save_warmup(paths.state, model, tok, run_name("warmup", name), params_hash,
                               opt.state_dict(), gen.get_state(), curve, checkpoint.answers_digest(clean[0]))
        metrics = {"sft_run": w.run, "steps": len(curve),
                   "final_loss": final_loss(curve),
                   "train_seconds": round(seconds, 2), "mlflow_run_id": mlrun.run_id,
                   "params_hash": params_hash}
        write_json(paths.metrics, metrics)
        mlrun.log_metrics(metrics)
    return metrics
