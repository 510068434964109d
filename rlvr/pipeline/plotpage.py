"""The page `dvc plots show` fills, with Vega inside it, so that the views draw with no network.

DVC's own page loads vega, vega-lite and vega-embed from a CDN (jsdelivr) and stays blank offline.
`.dvc/config` names this page instead (`plots.html_template = plots/offline.html`): DVC puts each
view's `vegaEmbed(...)` call where the page says `{plot_divs}`, and since the page has no
`{scripts}` placeholder, DVC adds no CDN tags. The libraries are one script inlined in the page,
the bundle vl-convert-python ships (vega, vega-lite and vega-embed, built to run in a browser), at
the Vega-Lite major of the templates' `$schema`. The page is committed; only regenerating it needs
vl-convert-python (`pip install -e '.[plots]'`, then `rlvr pipeline --plots-page`).
"""

from __future__ import annotations

import html
from importlib import metadata
from pathlib import Path

from rlvr.fields import UserError

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / ".dvc" / "plots" / "offline.html"
# The pin in pyproject's `plots` extra: the newest vl-convert whose bundle is vega 5 (5.30), vega-lite
# 5.21 and vega-embed 6 (the majors DVC's own page loads). From 1.8 it bundles vega 6, and
# vega-embed then warns on every view that the compiled vega-lite 5 spec targets vega v5.
VL_CONVERT = "1.7.0"
VEGA_LITE = "5.21"  # the templates' $schema is vega-lite/v5

# DVC calls vegaEmbed(el, spec) with no options. Offline, the menu's "Open in Vega Editor" cannot
# work (it posts the spec to vega.github.io): keep the menu's export and source entries only.
EMBED_DEFAULTS = """\
(function () {
  const embed = window.vegaEmbed;
  const actions = {export: true, source: true, compiled: true, editor: false};
  window.vegaEmbed = Object.assign(
    (el, spec, opts) => embed(el, spec, Object.assign({actions: actions}, opts)), embed);
})();"""

STYLE = """\
body { font-family: sans-serif; margin: 12px; display: flex; flex-wrap: wrap; gap: 28px 16px; }"""


def page(bundle: str, versions: dict[str, str]) -> str:
    """The HTML template: `bundle` inlined, the embed defaults, the placeholders DVC fills."""
    if "</script" in bundle.lower():
        raise ValueError("the bundle holds '</script': it cannot be inlined in a <script> element")
    made = ", ".join(f"{k} {v}" for k, v in versions.items())
    return f"""<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
{{refresh_tag}}
<title>DVC plots</title>
<!-- `dvc plots show` fills this page (.dvc/config: plots.html_template). Written by
     `rlvr pipeline --plots-page`: edit rlvr/pipeline/plotpage.py, not this file. -->
<meta name="generator" content="{html.escape(made)}">
<style>
{STYLE}
</style>
<script>
(function () {{  // the bundle's top-level names stay out of the page's, where DVC declares `var spec`
{bundle}
}}).call(window);
</script>
<script>
{EMBED_DEFAULTS}
</script>
</head>
<body>
{{plot_divs}}
</body>
</html>
"""


def bundle() -> tuple[str, dict[str, str]]:
    """vl-convert's browser bundle of vega + vega-lite + vega-embed, and their versions."""
    try:
        found = metadata.version("vl-convert-python")
    except metadata.PackageNotFoundError:
        found = None
    if found != VL_CONVERT:
        raise UserError(
            f"regenerating {PAGE.relative_to(ROOT)} needs vl-convert-python=={VL_CONVERT} "
            f"({'found ' + found if found else 'not installed'}): pip install -e '.[plots]'"
        )
    import vl_convert

    versions = {
        "vl-convert-python": found,
        "vega": vl_convert.get_vega_version(),
        "vega-lite": VEGA_LITE,
        "vega-embed": vl_convert.get_vega_embed_version(),
    }
    return vl_convert.javascript_bundle(vl_version=VEGA_LITE), versions


def write(path: Path = PAGE) -> Path:
    from rlvr.io.files import write_text

    js, versions = bundle()
    return write_text(path, page(js, versions))
