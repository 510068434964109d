"""A params file's text in the layout `dvc exp run -S` writes it back in.

DVC rewrites a params file whole on every `-S` (ruamel.yaml's round trip: every list in block style,
null written empty, comments kept with their keys). A file already in that layout is a fixed point
of the rewrite, so an experiment's `git diff params.yaml` shows the keys it set and nothing else.
`rlvr check` says whether a file is; `rlvr check --layout` writes it so. No
stage reads this: it is about the file's text, never its values.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from rlvr.io.files import write_text


def dvc_layout(text: str) -> str:
    """`text` as `dvc exp run -S` writes a params file back: DVC loads it with ruamel.yaml's
    round-trip loader, merges the whole overridden config back into it (a mapping key by key,
    anything else replaced by a plain value: so every list comes back in block style) and dumps it
    with `default_flow_style = False`. Comments stay with their keys."""
    from ruamel.yaml import YAML

    yaml = YAML()
    yaml.default_flow_style = False
    data = yaml.load(text)
    _merge(data, json.loads(json.dumps(data)))
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


def _merge(into: dict, plain: dict) -> None:
    """DVC's merge of a new config into the loaded file: mappings recursively, the rest replaced."""
    for key, value in plain.items():
        if isinstance(into.get(key), dict) and isinstance(value, dict):
            _merge(into[key], value)
        else:
            into[key] = value


def write_layout(path: str | Path) -> list[str]:
    """Write `path` in DVC's layout, its values unchanged, and return the comments that layout
    cannot keep (a comment directly below a list goes with the list when DVC replaces it: as DVC
    would drop it on the next `-S`, it is named here rather than lost without a word)."""
    text = Path(path).read_text(encoding="utf-8")
    laid = text
    for _ in range(3):  # a comment below a flow list moves onto the list in the first pass
        if (again := dvc_layout(laid)) == laid:
            break
        laid = again
    write_text(path, laid)
    kept = {line.strip() for line in laid.splitlines()}
    lost = [c for c in (line.strip() for line in text.splitlines()) if c.startswith("#") and c not in kept]
    return [f"{c} (below a list, where DVC drops it: put it above the list's key)" for c in lost]


def layout_problem(path: str | Path) -> str | None:
    """Why `path` is not in DVC's layout (the first line a `-S` rewrite would change), or None."""
    text = Path(path).read_text(encoding="utf-8")
    wanted = dvc_layout(text)
    if wanted == text:
        return None
    have, want = text.splitlines(), wanted.splitlines()
    differ = (n for n, (a, b) in enumerate(zip(have, want), start=1) if a != b)
    number = next(differ, min(len(have), len(want)) + 1)
    return (
        f"{path}: line {number} is not as `dvc exp run -S` writes it, so an experiment's diff would "
        f"show DVC's rewrite beyond its key (`rlvr check --layout` writes the file in DVC's layout)"
    )
