"""Tiny tokenizer and chat template.

Vocabulary: special tokens, one token per digit (so "85" is `8 5 <eos>`, as in chapter B), the two
operators, space and full stop, and the handful of words the system prompt uses. Encoding scans the
text left to right: a special in angle brackets, a whole word, or one character. Anything else is an
error naming the character, never a silent <unk>.
"""

from __future__ import annotations

import re

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
SYSTEM, USER, ASSISTANT = "<system>", "<user>", "<assistant>"
SPECIALS = (PAD, BOS, EOS, SYSTEM, USER, ASSISTANT)
CHARS = tuple("0123456789") + ("+", "=", " ", ".")
SYSTEM_PROMPT = "reply with the sum ."
WORDS = ("reply", "with", "the", "sum")

_PIECE = re.compile(r"<[a-z]+>|[a-z]+|.", re.DOTALL)


class Tokenizer:
    """Fixed vocabulary; ids are positions in `self.vocab` (pad is 0)."""

    def __init__(self) -> None:
        self.vocab: list[str] = [*SPECIALS, *CHARS, *WORDS]
        self.ids = {tok: i for i, tok in enumerate(self.vocab)}
        self.pad_id, self.bos_id, self.eos_id = self.ids[PAD], self.ids[BOS], self.ids[EOS]
        self.special_ids = frozenset(self.ids[s] for s in SPECIALS)
        self.digit_ids = tuple(self.ids[d] for d in "0123456789")

    def __len__(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        out = []
        for m in _PIECE.finditer(text):
            piece = m.group()
            if piece not in self.ids:
                raise ValueError(
                    f"cannot tokenize {piece!r} at position {m.start()} of {text!r}; "
                    f"known pieces: specials, digits, '+', '=', ' ', '.', words {list(WORDS)}"
                )
            out.append(self.ids[piece])
        return out

    def decode(self, ids, skip_special: bool = False) -> str:
        pieces = []
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self.vocab):
                raise ValueError(f"token id {i} outside the vocabulary (size {len(self.vocab)})")
            if skip_special and i in self.special_ids:
                continue
            pieces.append(self.vocab[i])
        return "".join(pieces)

    def prompt_ids(self, user: str) -> list[int]:
        """Chat template up to the point where the assistant starts answering."""
        return self.encode(f"{BOS}{SYSTEM}{SYSTEM_PROMPT}{USER}{user}{ASSISTANT}")

    def response_ids(self, answer: str) -> list[int]:
        """What a perfect assistant emits: the answer's characters, then <eos>."""
        return self.encode(answer) + [self.eos_id]
