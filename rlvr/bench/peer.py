"""The peers `rlvr bench --peer trl` measures us against: TRL's GRPOTrainer and Hugging Face `generate`.

Both run on exactly our benchmark workloads, built locally (nothing is downloaded):
- the model is a GPT-2 (`transformers.GPT2LMHeadModel`) of our TinyLM's width, depth, heads and
  context, over our vocabulary (GPT-2 adds biases: a few thousand more parameters);
- the tokenizer is our vocabulary in a `tokenizers` WordLevel model that splits text into our
  pieces (specials, the system prompt's words, single characters), so a prompt is the same token
  ids in both stacks;
- a GRPO step is TRL's optimizer step: generate G completions for each of P prompts, score them,
  one update (`num_iterations` 1, as our mu = 1), with rewards drawn at random so every group is
  mixed, as in our benchmark. TRL samples with its default settings (temperature 1, no top-k or
  top-p: the distribution ours samples).

Each runs here on its own: `rlvr.bench.fair` times it in a process of its own, never beside ours.

TRL and transformers are an optional extra (`pip install -e '.[peer]'`); without it every peer
figure is reported as "not installed".
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import tempfile
import time

import torch

from rlvr.configs import ModelConfig
from rlvr.tokenizer import BOS, EOS, PAD, SPECIALS, Tokenizer


def available() -> bool:
    """True when the `peer` extra (trl, transformers, datasets) is importable."""
    return all(importlib.util.find_spec(m) is not None for m in ("trl", "transformers", "datasets"))


def quiet() -> None:
    """Silence transformers' and TRL's deprecation chatter: the benchmark prints its own figures."""
    import warnings

    import transformers

    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module=r"(transformers|trl)\.")
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def versions() -> dict:
    import transformers
    import trl

    return {"trl": trl.__version__, "transformers": transformers.__version__}


def hf_tokenizer(tok: Tokenizer):
    """Our vocabulary as a `PreTrainedTokenizerFast`: the same ids for the same text."""
    from tokenizers import Regex
    from tokenizers import Tokenizer as RawTokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Split
    from transformers import PreTrainedTokenizerFast

    raw = RawTokenizer(WordLevel(dict(tok.ids), unk_token=PAD))
    raw.pre_tokenizer = Split(Regex(r"[a-z]+|."), behavior="isolated")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=[s for s in SPECIALS if s not in (BOS, EOS, PAD)],
    )
    probe = tok.prompt_ids("37+48=")
    if fast(tok.decode(probe), add_special_tokens=False)["input_ids"] != probe:
        raise RuntimeError("the peer tokenizer does not reproduce our token ids")
    return fast


def hf_model(cfg: ModelConfig, tok: Tokenizer):
    """A GPT-2 of TinyLM's shape (learned positions, tied embeddings, GELU MLP of 4 d)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=len(tok),
        n_positions=cfg.max_len,
        n_embd=cfg.d_model,
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        bos_token_id=tok.bos_id,
        eos_token_id=tok.eos_id,
        pad_token_id=tok.pad_id,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    return GPT2LMHeadModel(config)


def generate_seconds(
    model,
    prompts: torch.Tensor,
    n: int,
    max_new_tokens: int,
    tok: Tokenizer,
    seed: int,
    per_call: int | None = None,
) -> float:
    """Wall seconds for HF `generate` to draw n samples (T = 1, no top-k / top-p) of each prompt
    (P, Tp), `per_call` prompts a call (default: all P in one call, n * P rows)."""
    model.eval()
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    with torch.inference_mode():
        for chunk in prompts.split(per_call or len(prompts)):
            model.generate(
                chunk,
                attention_mask=torch.ones_like(chunk),
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                num_return_sequences=n,
                max_new_tokens=max_new_tokens,
                eos_token_id=tok.eos_id,
                pad_token_id=tok.pad_id,
            )
    return time.perf_counter() - t0


def accumulation(prompts: int, group_size: int, generation_batch: int | None) -> tuple[int, int]:
    """(per-device batch, gradient-accumulation steps) for TRL to generate `generation_batch`
    completions a call while every optimizer step still covers all prompts x G, every completion
    drawn from the current policy. None: the whole step in one batch (TRL's default here)."""
    rows = prompts * group_size
    batch = generation_batch or rows
    if rows % batch or batch % group_size:
        raise ValueError(
            f"generation batch {batch}: must divide the step's {rows} completions and hold whole "
            f"groups of {group_size}"
        )
    return batch, rows // batch


def grpo_trainer_steps(
    cfg: ModelConfig,
    prompts: list[str],
    group_size: int,
    max_new_tokens: int,
    beta: float,
    steps: int,
    lr: float,
    tok: Tokenizer,
    generation_batch: int | None = None,
    seed: int = 0,
) -> list[float]:
    """Seconds of each of `steps` TRL GRPOTrainer optimizer steps (P = len(prompts) per step, G
    each), TRL alone: its only callback is the clock. `generation_batch`: completions per `generate`
    call (TRL's `generation_batch_size`; see `accumulation`)."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    gen = torch.Generator().manual_seed(seed)

    def random_reward(completions, **kwargs) -> list[float]:  # noqa: ARG001
        return torch.rand(len(completions), generator=gen).round().tolist()  # mixed groups, as ours

    times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):  # noqa: ARG002
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):  # noqa: ARG002
            times.append(time.perf_counter() - self.t0)

    with tempfile.TemporaryDirectory(prefix="rlvr-trl-") as out:
        from transformers import GPT2LMHeadModel

        hf_model(cfg, tok).save_pretrained(f"{out}/model")  # TRL builds its reference model from a path
        model = GPT2LMHeadModel.from_pretrained(f"{out}/model")
        batch, accumulate = accumulation(len(prompts), group_size, generation_batch)
        args = GRPOConfig(
            output_dir=out,
            per_device_train_batch_size=batch,
            gradient_accumulation_steps=accumulate,
            generation_batch_size=batch,  # one generate call per micro-batch: on-policy
            num_generations=group_size,
            max_completion_length=max_new_tokens,
            beta=beta,
            learning_rate=lr,
            max_steps=steps,
            num_iterations=1,
            use_cpu=True,
            bf16=False,
            fp16=False,
            report_to="none",
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            seed=seed,
            dataloader_num_workers=0,
            shuffle_dataset=False,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=random_reward,
            args=args,
            train_dataset=Dataset.from_dict({"prompt": prompts * steps}),
            processing_class=hf_tokenizer(tok),
            callbacks=[Clock()],
        )
        with contextlib.redirect_stdout(io.StringIO()):  # the Trainer prints its own summary dict
            trainer.train()
    return times


PEER_MISSING = "not installed"  # a peer figure when the `peer` extra is absent
PEER_SKIPPED = "not run (rlvr bench --peer trl)"


def note(peer: bool) -> str:
    """What a peer column says when it was not measured: the extra is missing, or it was not asked
    for ("" when it was measured)."""
    return PEER_MISSING if not available() else "" if peer else PEER_SKIPPED


def require() -> None:
    """The `peer` extra is importable (else one clear error), its chatter silenced."""
    if not available():
        from rlvr.fields import ConfigError

        raise ConfigError("rlvr bench --peer trl needs TRL and transformers: pip install -e '.[peer]'")
    quiet()


def as_a_user_runs(threads: int, seed: int) -> None:
    """A peer's block as a user runs it: our thread count (the same cores), seeded, TRL's and
    transformers' chatter silenced; not our deterministic-ops mode, which costs the peer time."""
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    require()
