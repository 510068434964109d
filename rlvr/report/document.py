"""A small document model written out twice: as Markdown and as one self-contained HTML page.

The report is built once as a list of blocks (headings, paragraphs, tables, figures, collapsible
details); `markdown()` and `html_page()` write them. Text may use three inline forms, kept in both
outputs: **bold**, `code` and [a link](#anchor). Everything else is escaped in HTML.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2
    anchor: str | None = None  # id in HTML, listed in the table of contents


@dataclass(frozen=True)
class Para:
    text: str
    cls: str | None = None


@dataclass(frozen=True)
class Bullets:
    items: list[str]


@dataclass(frozen=True)
class Table:
    header: list[str]
    rows: list[list[str]]
    cls: str = ""
    row_classes: list[str] | None = None  # one CSS class per row (e.g. its verdict)
    details: list[str] | None = None  # per row: shown collapsed in the HTML, as a last column in Markdown
    details_label: str = "details"
    row_ids: list[str] | None = None  # one HTML id per row (link targets)


@dataclass(frozen=True)
class Figure:
    name: str  # file name under the Markdown's figure folder
    png: bytes
    caption: str  # one sentence: what the figure shows
    provenance: str  # where it came from, in one short line
    anchor: str | None = None
    svg: str | None = None  # the same figure as SVG, a file name under the figure folder (linked)
    record: str | None = None  # its full provenance record, a file name under the figure folder (linked)


@dataclass(frozen=True)
class Details:
    summary: str
    blocks: list = field(default_factory=list)


@dataclass(frozen=True)
class Section:
    """A level-2 heading and the blocks under it: folded in the HTML (its heading the fold's handle)
    unless `open`, so the page opens on what is read first; plain Markdown sections."""

    heading: Heading
    blocks: list = field(default_factory=list)
    open: bool = False


@dataclass(frozen=True)
class Contents:
    """The table of contents: every Heading with an anchor, at level <= `depth`."""

    depth: int = 2


Block = Heading | Para | Bullets | Table | Figure | Details | Section | Contents


def sections(blocks: list, opened: tuple[str, ...]) -> list:
    """`blocks` with each level-2 heading and what follows it, up to the next, made a Section, open
    where its anchor is in `opened`; what precedes the first such heading is left as it is."""
    out: list = []
    for b in blocks:
        if isinstance(b, Heading) and b.level == 2:
            out.append(Section(b, [], b.anchor in opened))
        elif out and isinstance(out[-1], Section):
            out[-1].blocks.append(b)
        else:
            out.append(b)
    return out


_INLINE = re.compile(r"\*\*(.+?)\*\*|`([^`]+)`|\[([^\]]+)\]\((#[\w-]+)\)")


def inline_html(text: str) -> str:
    """Escape `text` for HTML, keeping **bold**, `code` and [links](#anchor)."""
    out, pos = [], 0
    for m in _INLINE.finditer(text):
        out.append(html.escape(text[pos : m.start()]))
        bold, code, label, href = m.groups()
        if bold is not None:
            out.append(f"<b>{inline_html(bold)}</b>")
        elif code is not None:
            out.append(f"<code>{html.escape(code)}</code>")
        else:
            out.append(f'<a href="{href}">{html.escape(label)}</a>')
        pos = m.end()
    out.append(html.escape(text[pos:]))
    return "".join(out)


def _headings(blocks: list, depth: int) -> list[Heading]:
    found = []
    for b in blocks:
        if isinstance(b, Heading) and b.anchor and b.level <= depth:
            found.append(b)
        elif isinstance(b, Section):
            found += _headings([b.heading, *b.blocks], depth)
        elif isinstance(b, Details):
            found += _headings(b.blocks, depth)
    return found


# ---------------------------------------------------------------------------------------------
# Markdown


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(t: Table) -> str:
    header = [*t.header, t.details_label] if t.details else t.header
    rows = [[*r, d] for r, d in zip(t.rows, t.details)] if t.details else t.rows
    lines = ["| " + " | ".join(_md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows])


def _md_block(b, blocks: list, figure_dir: str) -> str:
    if isinstance(b, Heading):
        return "#" * b.level + " " + b.text
    if isinstance(b, Para):
        return b.text
    if isinstance(b, Bullets):
        return "\n".join(f"- {item}" for item in b.items)
    if isinstance(b, Table):
        return _md_table(b)
    if isinstance(b, Figure):
        svg = f" ([SVG]({figure_dir}/{b.svg}))" if b.svg else ""
        record = f" ([full record]({figure_dir}/{b.record}))" if b.record else ""
        return (
            f"![{b.name}]({figure_dir}/{b.name})\n\n*{b.caption}*{svg}\n\nProvenance: {b.provenance}{record}"
        )
    if isinstance(b, Section):
        return "\n\n".join(_md_block(x, blocks, figure_dir) for x in (b.heading, *b.blocks))
    if isinstance(b, Details):
        inner = "\n\n".join(_md_block(x, blocks, figure_dir) for x in b.blocks)
        return f"<details><summary>{b.summary}</summary>\n\n{inner}\n\n</details>"
    if isinstance(b, Contents):
        return "\n".join(
            "  " * (h.level - 2) + f"- [{h.text}](#{h.anchor})" for h in _headings(blocks, b.depth)
        )
    raise TypeError(f"not a block: {b!r}")


def markdown(blocks: list, figure_dir: str) -> str:
    """The document as Markdown; figures link to `figure_dir/<name>`."""
    return "\n\n".join(_md_block(b, blocks, figure_dir) for b in blocks) + "\n"


# ---------------------------------------------------------------------------------------------
# HTML

CSS = """
body{font-family:system-ui,-apple-system,sans-serif;max-width:1180px;margin:1.5em auto;padding:0 16px;
 color:#222;line-height:1.45}
h1{margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
h3{margin-top:1.4em}
table{border-collapse:collapse;margin:.8em 0;font-size:13px;width:100%}
td,th{border:1px solid #d5d5d5;padding:4px 6px;text-align:left;vertical-align:top;overflow-wrap:break-word}
th{background:#f3f3f3}
td.verdict{font-weight:600;min-width:7.5em}td.kind,td.book{white-space:nowrap}
tr.reproduced td.verdict{background:#d9f2d9}tr.differs td.verdict{background:#f8d7d7}
tr.inconclusive td.verdict{background:#fdf3c4}tr.cited td.verdict{background:#eee}
tr.missing td.verdict{background:#fde9b6}
details{margin:.2em 0}details summary{cursor:pointer;color:#335}
details.section>summary{border-bottom:1px solid #ddd;margin-top:1.2em}
details.section>summary h2{display:inline;border:0;margin:0;padding:0;color:#222}
td details{font-size:12px}
figure{margin:1.2em 0}figure img{max-width:100%;height:auto;border:1px solid #ddd}
figcaption{font-size:14px;color:#333;margin-top:.3em}figcaption .prov{display:block;font-size:12px;color:#555}
code{font-size:12px;background:#f5f5f5;padding:0 2px;overflow-wrap:anywhere}
nav.toc{background:#f8f8fb;border:1px solid #e0e0ea;padding:.4em 1em}
nav.toc ul{margin:.2em 0;padding-left:1.2em;columns:3}nav.toc li{break-inside:avoid}
p.counts span{display:inline-block;padding:2px 8px;margin-right:6px;border-radius:3px;font-weight:600}
.c-reproduced{background:#d9f2d9}.c-differs{background:#f8d7d7}.c-inconclusive{background:#fdf3c4}.c-cited{background:#eee}
"""


# A link to an anchor inside a folded section opens the folds around it (Chromium does this itself;
# not every browser does).
REVEAL = (
    "function reveal(){const t=location.hash&&document.getElementById(decodeURIComponent("
    "location.hash.slice(1)));for(let e=t;e;e=e.parentElement)if(e.tagName==='DETAILS')e.open=true;"
    "if(t)t.scrollIntoView()}addEventListener('hashchange',reveal);addEventListener('load',reveal);"
)


def _html_table(t: Table) -> str:
    header = [*t.header, t.details_label] if t.details else t.header
    head = "".join(f"<th>{inline_html(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(t.rows):
        rc = t.row_classes[i] if t.row_classes else ""
        rid = f' id="{t.row_ids[i]}"' if t.row_ids else ""
        cells = [
            f'<td class="{h}">{inline_html(str(c))}</td>'
            if h in ("verdict", "kind", "book")  # short words and numbers: never broken across lines
            else f"<td>{inline_html(str(c))}</td>"
            for h, c in zip(t.header, row)
        ]
        if t.details:
            cells.append(
                f"<td><details><summary>{html.escape(t.details_label)}</summary>"
                f"{inline_html(t.details[i])}</details></td>"
            )
        body.append(f'<tr class="{rc}"{rid}>' + "".join(cells) + "</tr>")
    return f'<table class="{t.cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _html_block(b, blocks: list, figure_dir: str | None = None) -> str:
    if isinstance(b, Heading):
        anchor = f' id="{b.anchor}"' if b.anchor else ""
        return f"<h{b.level}{anchor}>{inline_html(b.text)}</h{b.level}>"
    if isinstance(b, Para):
        cls = f' class="{b.cls}"' if b.cls else ""
        return f"<p{cls}>{inline_html(b.text)}</p>"
    if isinstance(b, Bullets):
        return "<ul>" + "".join(f"<li>{inline_html(i)}</li>" for i in b.items) + "</ul>"
    if isinstance(b, Table):
        return _html_table(b)
    if isinstance(b, Figure):
        data = base64.b64encode(b.png).decode()
        anchor = f' id="{b.anchor}"' if b.anchor else ""
        svg = (
            f' <a class="svg" href="{html.escape(figure_dir)}/{html.escape(b.svg)}">SVG</a>'
            if b.svg and figure_dir
            else ""
        )
        record = (
            f' · <a href="{html.escape(figure_dir)}/{html.escape(b.record)}">full record</a>'
            if b.record and figure_dir
            else ""
        )
        return (
            f'<figure{anchor}><img alt="{html.escape(b.name)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{inline_html(b.caption)}{svg}"
            f'<span class="prov">provenance: {inline_html(b.provenance)}{record}</span></figcaption></figure>'
        )
    if isinstance(b, Section):
        inner = "".join(_html_block(x, blocks, figure_dir) for x in b.blocks)
        head = _html_block(b.heading, blocks, figure_dir)
        return (
            f'<details class="section"{" open" if b.open else ""}><summary>{head}</summary>{inner}</details>'
        )
    if isinstance(b, Details):
        inner = "".join(_html_block(x, blocks, figure_dir) for x in b.blocks)
        return f"<details><summary>{inline_html(b.summary)}</summary>{inner}</details>"
    if isinstance(b, Contents):
        items = "".join(
            f'<li><a href="#{h.anchor}">{inline_html(h.text)}</a></li>' for h in _headings(blocks, b.depth)
        )
        return f'<nav class="toc" id="contents"><b>Contents</b><ul>{items}</ul></nav>'
    raise TypeError(f"not a block: {b!r}")


def html_page(blocks: list, title: str, figure_dir: str | None = None) -> str:
    """The document as one HTML page: CSS inline, figures embedded as PNG, nothing fetched; with
    `figure_dir` (the figure folder beside the page), each figure links its SVG there."""
    body = "\n".join(_html_block(b, blocks, figure_dir) for b in blocks)
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, '
        f'initial-scale=1"><title>{html.escape(title)}</title>'
        f"<style>{CSS}</style><script>{REVEAL}</script></head><body>\n{body}\n</body></html>\n"
    )
