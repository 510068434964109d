"""`rlvr bench --only bootstrap`: the pass@k band's resampling (`rlvr.passk.bootstrap_band`) against
`scipy.stats.bootstrap`'s percentile method on the passk stage's sizes (300 held-out problems, every
k up to 64, `passk.bootstrap` resamples): seconds, peak memory and the largest difference of the
two bands, drawn from generators of one seed."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np

from rlvr.bench import fair
from rlvr.bench.targets import TARGETS
from rlvr.io.params import Params
from rlvr.passk import bootstrap_band, pass_at_k

PROBLEMS, K = 300, 64  # the held-out split; the chapter's largest k


def _measured(call, repeats: int) -> tuple[dict, float, tuple]:
    """Seconds of `repeats` calls after a warm-up, the peak traced MiB of one more, and its result."""
    call()
    seconds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - t0)
    tracemalloc.start()
    out = call()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return fair.spread(seconds), peak, out


def bench(params: Params, repeats: int = 5) -> dict:
    """Both resamplers on counts of a model that solves problem i at a Beta(0.6, 0.4)-drawn rate
    (per-problem solve rates spread as a trained model's are), n = passk.n samples a problem."""
    from scipy.stats import bootstrap

    n, resamples = params.passk.n, params.passk.bootstrap
    rng = np.random.default_rng(params.seed)
    c = rng.binomial(n, rng.beta(0.6, 0.4, size=PROBLEMS))  # (P,)
    ks = np.arange(1, K + 1)
    table = np.stack([pass_at_k(c, n, k) for k in ks], axis=1)  # (P, K)

    def ours():
        return bootstrap_band(c, n, ks, resamples, params.seed)

    def scipy_percentile():
        res = bootstrap(
            (table,),
            np.mean,
            axis=0,
            vectorized=True,
            n_resamples=resamples,
            method="percentile",
            random_state=np.random.default_rng(params.seed),
        )
        return res.confidence_interval.low, res.confidence_interval.high

    ours_s, ours_mib, (lo, hi) = _measured(ours, repeats)
    scipy_s, scipy_mib, (slo, shi) = _measured(scipy_percentile, repeats)
    return {
        "problems": PROBLEMS,
        "ks": K,
        "resamples": resamples,
        "ours_seconds": ours_s,
        "scipy_seconds": scipy_s,
        "ours_peak_mib": round(ours_mib, 1),
        "scipy_peak_mib": round(scipy_mib, 1),
        "max_abs_difference": float(max(np.abs(lo - slo).max(), np.abs(hi - shi).max())),
        **TARGETS["bootstrap"],
    }
