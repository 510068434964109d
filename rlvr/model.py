"""TinyLM: a pre-norm decoder-only transformer, and a batched KV-cache sampler.

The model is nanoGPT-shaped (learned positions, tied embeddings, GELU MLP, no biases in linears)
and small enough (~0.4 M parameters) to train on two CPU cores in seconds.

The sampler is built for RL rollouts, where each prompt is sampled n times:
1. every prompt is encoded once (prefill: the part all prompts share, the chat template's system
   prompt, once for the batch, `tree_forward`), and its keys/values are *shared* by its n samples:
   the decode step attends to the prompt cache by broadcasting, never by copying it n times;
2. rows stop at <eos> (later tokens are <pad>, masked out) and the loop stops when all rows have;
3. random draws come from an explicit torch.Generator through inverse-CDF sampling, one uniform per
   row per step, so a cache-free sampler (a full forward per step: tests/maths/test_model.py's oracle)
   reproduces it token for token;
   the generator lives on the device of the model and prompts (a CUDA one on a GPU), and so does
   every tensor made here, so a seed gives the same tokens on every run on one device (a GPU draws
   other uniforms than the CPU does: the tokens agree per device, not across devices);
4. each decode step runs the layers over blocks of about `DECODE_CHUNK_ROWS` rows (whole prompts),
   so a block's activations stay in cache between its products instead of streaming the whole
   batch through memory once per op. Rows never interact, so the tokens are those of one big batch.
Prompts in one call must share a length (true for both tasks); that keeps the cache free of padding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from rlvr.configs import ModelConfig

# Rows per block of the decode step. Measured on the 2-core CI machine (pass@k's 19,200 rows of
# chapter B's SFT policy, 5 tokens, medians of 5 interleaved runs): one block of all rows 1.93 s,
# blocks of 4,096 / 2,048 / 1,024 / 512 rows 1.50 / 1.53 / 1.53 / 1.64 s at two threads; at one
# thread 3.13 s -> 2.16 s (2,048). The tokens are identical whatever the block size (tested).
DECODE_CHUNK_ROWS = 2048


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d = cfg.d_model
        self.n_head = cfg.n_head
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d, bias=False)
        self.fc_out = nn.Linear(4 * d, d, bias=False)

    def heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(B, T, d) -> q, k, v each (B, H, T, D)."""
        B, T, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)  # (B, T, d) x3
        shape = (B, T, self.n_head, d // self.n_head)
        return (t.view(shape).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D) x3

    def finish(self, x: torch.Tensor, att: torch.Tensor) -> torch.Tensor:
        """Residual add of the attention output (B, T, d), then the MLP."""
        x = x + self.proj(att)
        return x + self.fc_out(F.gelu(self.fc(self.ln2(x))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.heads(x)  # (B, H, T, D)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, D)
        return self.finish(x, att.transpose(1, 2).reshape(x.shape))


class TinyLM(nn.Module):
    def __init__(self, cfg: ModelConfig, vocab_size: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.max_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.apply(self._init)
        for name, p in self.named_parameters():  # GPT-2: scale residual projections by depth
            if name.endswith(("proj.weight", "fc_out.weight")):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    @property
    def device(self) -> torch.device:
        """Where the weights are: the tensors fed to the model, and its generators, must live there too."""
        return self.tok_emb.weight.device

    def embed(self, idx: torch.Tensor, start: int = 0) -> torch.Tensor:
        T = idx.shape[-1]
        if start + T > self.cfg.max_len:
            raise ValueError(f"sequence of {start + T} tokens exceeds model.max_len = {self.cfg.max_len}")
        pos = torch.arange(start, start + T, device=idx.device)
        return self.tok_emb(idx) + self.pos_emb(pos)  # (..., T, d)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln_f(x) @ self.tok_emb.weight.T  # tied head: (..., V)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """(B, T) token ids -> (B, T, V) next-token logits."""
        x = self.embed(idx)  # (B, T, d)
        for block in self.blocks:
            x = block(x)
        return self.logits(x)


def common_prefix_len(rows: torch.Tensor) -> int:
    """Number of leading columns on which every row of (R, T) agrees."""
    return int((rows == rows[:1]).all(dim=0).int().cumprod(dim=0).sum())


def tree_forward(model: TinyLM, levels: list[torch.Tensor], cache: list | None = None) -> list[torch.Tensor]:
    """Run sequences that share prefixes, encoding each shared piece once.

    levels[i] is (R_i, T_i) token ids; R_i is a multiple of R_{i-1}, and row r of level i continues
    row r // (R_i // R_{i-1}) of level i - 1 (consecutive rows share their parent). Each level
    attends to all of its ancestors and causally to itself; positions continue across levels.
    Returns each level's final hidden states (R_i, T_i, d), before ln_f. Equal, to float rounding,
    to running every full sequence, but a piece shared by k rows costs 1 row instead of k, forward
    and backward: gradients reach it through the broadcast (summed over its children).
    With `cache`, each layer appends (keys, values): per level, (R_i, H, T_i, D) each (the sampler's
    prompt cache).
    """
    xs, start = [], 0
    for ids in levels:
        xs.append(model.embed(ids, start=start))  # (R_i, T_i, d)
        start += ids.shape[1]
    for block in model.blocks:
        ks, vs, out = [], [], []
        for x in xs:
            R, T = x.shape[:2]
            q, k, v = block.heads(x)  # (R, H, T, D)
            if T:  # an empty level (a one-token response has no inputs) passes through
                K = torch.cat(
                    [a.repeat_interleave(R // a.shape[0], dim=0) for a in ks] + [k], dim=2
                )  # (R, H, T_anc+T, D)
                V = torch.cat([a.repeat_interleave(R // a.shape[0], dim=0) for a in vs] + [v], dim=2)
                allowed = torch.ones(T, K.shape[2], dtype=torch.bool, device=x.device).tril(
                    K.shape[2] - T
                )  # all ancestors, causal own
                att = F.scaled_dot_product_attention(q, K, V, attn_mask=allowed)  # (R, H, T, D)
                x = block.finish(x, att.transpose(1, 2).reshape(x.shape))
            ks.append(k)
            vs.append(v)
            out.append(x)
        if cache is not None:
            cache.append((ks, vs))
        xs = out
    return xs


def prompt_levels(prompts: torch.Tensor) -> list[torch.Tensor]:
    """Prompts (P, Tp) as `tree_forward` levels: the c columns they all share (the chat template's
    system prompt) as one row (1, c), then each prompt's rest (P, Tp - c), at least one column of it.
    One prompt, or none shared: the prompts as they are."""
    P, Tp = prompts.shape
    c = min(common_prefix_len(prompts), Tp - 1) if P > 1 else 0
    return ([prompts[:1, :c]] if c else []) + [prompts[:, c:]]


def grouped_response_logits(model: TinyLM, prompts: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
    """Next-token logits at every response position, encoding shared prefixes once.

    prompts (P, Tp); responses (P*G, T), G consecutive rows per prompt. Returns (P*G, T, V): row i,
    position t predicts responses[i, t]. Each prompt is encoded once for its group, and the part
    every prompt shares (the chat template's system prompt) once for the batch (`tree_forward`).
    """
    P = prompts.shape[0]
    B = responses.shape[0]
    levels = prompt_levels(prompts) + [responses[:, :-1]]  # inputs: all but the last response token
    *_, xp, xr = tree_forward(model, levels)  # (P, Tp-c, d), (B, T-1, d)
    first = model.logits(xp[:, -1:]).repeat_interleave(B // P, dim=0)  # (B, 1, V) predicts responses[:, 0]
    return torch.cat([first, model.logits(xr)], dim=1)  # (B, T, V)


def token_log_probs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Log-prob of each next token: logits (B, T, V) from model(tokens) -> (B, T-1)."""
    logp = F.log_softmax(logits[:, :-1].float(), dim=-1)  # (B, T-1, V)
    return logp.gather(-1, tokens[:, 1:].unsqueeze(-1)).squeeze(-1)  # (B, T-1)


@dataclass
class Rollout:
    """Sampled sequences; row p * n + j is sample j of prompt p (n consecutive rows per prompt)."""

    tokens: torch.Tensor  # (P*n, Tp + T) prompt then response, <pad> after <eos>
    mask: torch.Tensor  # (P*n, Tp + T) 1.0 on response tokens up to and including <eos>
    prompt_len: int

    @property
    def response(self) -> torch.Tensor:
        return self.tokens[:, self.prompt_len :]  # (P*n, T)


def draw(logits: torch.Tensor, temperature: float, generator: torch.Generator | None) -> torch.Tensor:
    """One token per row by inverse-CDF sampling: (B, V) -> (B,). temperature 0 means greedy.
    `generator` lives on the logits' device (a CUDA generator for CUDA logits)."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    u = torch.rand(logits.shape[0], 1, generator=generator, device=logits.device)  # (B, 1)
    cdf = torch.softmax(logits.float() / temperature, dim=-1).cumsum(dim=-1)  # (B, V)
    return torch.searchsorted(cdf, u).squeeze(-1).clamp_max(logits.shape[-1] - 1)  # (B,)


def _check_prompts(model: TinyLM, prompts: torch.Tensor, max_new_tokens: int) -> None:
    if prompts.dim() != 2:
        raise ValueError(
            f"prompts must be (P, Tp) token ids of equal length, got shape {tuple(prompts.shape)}"
        )
    if prompts.shape[1] + max_new_tokens > model.cfg.max_len:
        raise ValueError(
            f"prompt length {prompts.shape[1]} + max_new_tokens {max_new_tokens} "
            f"exceeds model.max_len = {model.cfg.max_len}"
        )


def _finish(prompts: torch.Tensor, out: torch.Tensor, n: int, eos_id: int, pad_id: int) -> Rollout:
    """Pad after the first <eos>, build the mask, drop all-pad trailing columns."""
    P, Tp = prompts.shape
    is_eos = (out == eos_id).int()  # (B, T)
    after_eos = (is_eos.cumsum(dim=1) - is_eos) > 0  # (B, T) strictly after the first <eos>
    out = out.masked_fill(after_eos, pad_id)
    resp_mask = (~after_eos).float()  # (B, T)
    T = int(resp_mask.sum(dim=1).max().item()) if out.numel() else 0
    tokens = torch.cat([prompts.repeat_interleave(n, dim=0), out[:, :T]], dim=1)  # (B, Tp+T)
    mask = torch.cat([torch.zeros(P * n, Tp, device=out.device), resp_mask[:, :T]], dim=1)  # (B, Tp+T)
    return Rollout(tokens, mask, Tp)


def _outside_inference(fn):
    """Run `fn` under inference_mode, then clone its Rollout into normal tensors so that training
    code may use the sampled tokens in autograd (inference tensors cannot be saved for backward)."""

    def wrapper(*args, **kwargs) -> Rollout:
        with torch.inference_mode():
            roll = fn(*args, **kwargs)
        return Rollout(roll.tokens.clone(), roll.mask.clone(), roll.prompt_len)

    wrapper.__doc__, wrapper.__name__ = fn.__doc__, fn.__name__
    return wrapper


def _decode_block(model: TinyLM, x: torch.Tensor, prefix: list, own: list, t: int) -> torch.Tensor:
    """One decode step of a block of whole prompts: x (p, n, d) embeds each row's newest token.

    prefix[i]: layer i's prompt keys/values (p, H, Tp, D), shared by the prompt's n rows by
    broadcasting; own[i]: its (p, n, H, max_new, D) cache of the rows' own keys/values, written at t.
    Returns the next-token logits (p*n, V).
    """
    p, n, d = x.shape
    H = model.cfg.n_head
    D = d // H
    Tp = prefix[0][0].shape[2]
    x = x.reshape(p * n, 1, d)  # (p*n, 1, d)
    for block, (pk, pv), (own_k, own_v) in zip(model.blocks, prefix, own):
        q, k, v = (z.reshape(p, n, H, D) for z in block.heads(x))  # (p, n, H, D)
        own_k[:, :, :, t], own_v[:, :, :, t] = k, v
        s_pre = torch.einsum("pnhd,phsd->pnhs", q, pk)  # (p, n, H, Tp)
        s_own = torch.einsum("pnhd,pnhsd->pnhs", q, own_k[:, :, :, : t + 1])  # (p, n, H, t+1)
        w = torch.softmax(
            torch.cat([s_pre, s_own], dim=-1) * (1.0 / math.sqrt(D)), dim=-1
        )  # (p, n, H, Tp+t+1)
        att = torch.einsum("pnhs,phsd->pnhd", w[..., :Tp], pv)  # (p, n, H, D)
        att = att + torch.einsum("pnhs,pnhsd->pnhd", w[..., Tp:], own_v[:, :, :, : t + 1])
        x = block.finish(x, att.reshape(p * n, 1, d))  # (p*n, 1, d)
    return model.logits(x[:, 0])  # (p*n, V)


@_outside_inference
def sample(
    model: TinyLM,
    prompts: torch.Tensor,
    n: int,
    max_new_tokens: int,
    eos_id: int,
    pad_id: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    chunk_rows: int = DECODE_CHUNK_ROWS,
) -> Rollout:
    """n samples of each prompt with a shared-prefix KV cache. prompts (P, Tp) -> Rollout (P*n rows).

    Each decode step runs blocks of max(1, chunk_rows // n) prompts; the draws are made for the
    whole batch at once, so the blocking never changes which uniform a row gets. `prompts` and
    `generator` live on the model's device, and the Rollout is made there.
    """
    _check_prompts(model, prompts, max_new_tokens)
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows = {chunk_rows}: must be >= 1")
    P, Tp = prompts.shape
    B, cfg = P * n, model.cfg
    H, D = cfg.n_head, cfg.d_model // cfg.n_head

    # Prefill: the columns every prompt shares (the chat template's system part) once, then each
    # prompt's rest; keep each layer's keys/values, the shared ones broadcast to every prompt.
    cache: list = []
    x = tree_forward(model, prompt_levels(prompts), cache)[-1]  # (P, Tp-c, d)
    prefix = [
        tuple(torch.cat([a.expand(P, -1, -1, -1) for a in parts], dim=2) for parts in kv) for kv in cache
    ]  # per layer: keys, values (P, H, Tp, D)
    last = model.logits(x[:, -1]).repeat_interleave(n, dim=0)  # (B, V)

    # Decode: queries are (p, n, H, D); prompt keys broadcast over n, own keys cached per row.
    dev = prompts.device
    own = [
        (
            torch.empty(P, n, H, max_new_tokens, D, device=dev),
            torch.empty(P, n, H, max_new_tokens, D, device=dev),
        )
        for _ in model.blocks
    ]
    step = max(1, chunk_rows // n)  # prompts per block
    blocks = [slice(a, min(P, a + step)) for a in range(0, P, step)]
    out = torch.full((B, max_new_tokens), pad_id, dtype=torch.long, device=dev)
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    for t in range(max_new_tokens):
        tok = draw(last, temperature, generator)  # (B,)
        out[:, t] = tok
        done |= tok == eos_id
        if bool(done.all()) or t == max_new_tokens - 1:
            break
        x = model.embed(tok.view(B, 1), start=Tp + t).view(P, n, -1)  # (P, n, d)
        last = torch.cat(
            [
                _decode_block(
                    model, x[b], [(k[b], v[b]) for k, v in prefix], [(k[b], v[b]) for k, v in own], t
                )
                for b in blocks
            ]
        )  # (B, V)
    return _finish(prompts, out, n, eos_id, pad_id)
