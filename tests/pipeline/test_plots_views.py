"""`dvc plots show`: the page renders with no network, every view names a template of ours, k is on a
log axis, the bands in the curve files are drawn, one colour per curve and legends that fit."""

import json
import re
import shutil
import subprocess
import sys
import tomllib
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from configobj import ConfigObj
from conftest import ROOT, at_head
from headless import CHROMIUM, probe

from rlvr.fields import ConfigError
from rlvr.pipeline import dvcfile, plotpage

TEMPLATES = ROOT / ".dvc" / "plots"


def views() -> dict[str, dict]:
    return {name: v for view in yaml.safe_load(dvcfile.render())["plots"] for name, v in view.items()}


def template(name: str) -> dict:
    return json.loads((TEMPLATES / f"{name}.json").read_text())


def layers(spec: dict) -> list[dict]:
    return spec.get("layer", [spec])


def curves(view: dict) -> list[tuple[str, str]]:
    """(file, field) of each curve a view draws."""
    return [
        (f, field)
        for f, fields in view["y"].items()
        for field in ([fields] if isinstance(fields, str) else fields)
    ]


def header(path: str) -> list[str]:
    """The columns of a committed curve file (HEAD's: the working tree's are the user's results)."""
    return at_head(path).read_text().splitlines()[0].split("\t")


def plots_repo(tmp_path) -> Path:
    """A git + DVC repo holding this checkout's pipeline, DVC config and plot templates, and HEAD's
    curves: what `dvc plots show` reads, without reading the checkout's own results."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for cmd in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"]):
        subprocess.run(cmd, cwd=repo, check=True, capture_output=True)
    for name in ("dvc.yaml", "params.yaml", ".dvc/config"):
        shutil.copy(ROOT / name, repo / name)
    shutil.copytree(TEMPLATES, repo / ".dvc" / "plots")
    shutil.copytree(at_head("reports/curves"), repo / "reports" / "curves")
    return repo


def band_columns(spec: dict) -> dict[str, list[str]] | None:
    """For each end ("lo", "hi") of the band a template draws, the column names it reads, in the
    order it tries them, as `{field}` patterns; None if it draws no band. Read from its expressions."""
    exprs = {t["as"]: t["calculate"] for t in spec.get("transform", []) if "calculate" in t}
    if not any("y2" in layer.get("encoding", {}) for layer in layers(spec)):
        return None
    out = {}
    for end in ("lo", "hi"):
        expr = exprs[f"band_{end}"]
        names = re.findall(r"datum\[datum\.field \+ '(\w+)'\]|datum\.(\w+)", expr)
        out[end] = list(dict.fromkeys("{field}" + s if s else n for s, n in names if n != "field"))
    return out


def test_dvc_config_names_a_page_that_loads_nothing_from_the_network():
    """A plain `dvc plots show` uses the committed page: it has the placeholder DVC fills with the
    views and none that would make DVC add its CDN script tags, and loads no script from elsewhere."""
    configured = ConfigObj(str(ROOT / ".dvc" / "config"))["plots"]["html_template"]
    page = ROOT / ".dvc" / configured
    assert page == plotpage.PAGE and page.is_file()
    text = page.read_text()
    assert "{plot_divs}" in text and "{scripts}" not in text
    assert loads(text) == [] and "cdn.jsdelivr" not in text
    assert loads('<script src="https://cdn.jsdelivr.net/npm/vega@5"></script>') == ["script"]


def loads(html: str) -> list[str]:
    """The elements of a page that fetch something (a script, style sheet, image or frame from a URL);
    a script's text is not parsed as markup."""
    found = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if any(k in ("src", "href") and v and not v.startswith("#") for k, v in attrs):
                found.append(tag)

    Tags().feed(html)
    return found


def test_committed_page_is_what_plotpage_writes_around_its_bundle():
    """Edit plotpage.py, then `rlvr pipeline --plots-page`: the page around the bundle is the code's."""
    text = plotpage.PAGE.read_text()
    made = re.search(r'<meta name="generator" content="([^"]+)">', text).group(1)
    versions = dict(part.rsplit(" ", 1) for part in made.split(", "))
    assert versions["vl-convert-python"] == plotpage.VL_CONVERT
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["plots"]
    assert extra == [f"vl-convert-python=={plotpage.VL_CONVERT}"]
    start = text.index("\n", text.index("(function () {  // the bundle")) + 1
    bundle = text[start : text.rindex("\n}).call(window);")]
    assert len(bundle) > 500_000  # vega + vega-lite + vega-embed, minified
    assert plotpage.page(bundle, versions) == text


def test_bundle_is_the_vega_lite_major_of_every_template():
    text = plotpage.PAGE.read_text()
    bundled = re.search(r"vega-lite (\d+)\.", text).group(1)
    for path in sorted(TEMPLATES.glob("*.json")):
        schema = json.loads(path.read_text())["$schema"]
        assert schema.endswith(f"/vega-lite/v{bundled}.json"), path.name
    assert plotpage.VEGA_LITE.split(".")[0] == bundled


def test_page_refuses_a_bundle_that_would_end_its_script_element():
    with pytest.raises(ValueError, match="</script"):
        plotpage.page("var s = '</SCRIPT>';", {"vega": "5"})


def test_dvc_plots_show_writes_a_page_with_the_bundle_and_no_cdn(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "dvc", "plots", "show", "-o", str(tmp_path / "plots")],
        cwd=plots_repo(tmp_path),
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    html = (tmp_path / "plots" / "index.html").read_text()
    assert "cdn.jsdelivr" not in html and "<script src" not in html
    assert html.count("vegaEmbed('#") == len(views())


def test_every_view_names_a_template_in_dvc_plots():
    for name, view in views().items():
        assert (TEMPLATES / f"{view['template']}.json").is_file(), name
    used = {v["template"] for v in views().values()}
    assert used == {p.stem for p in TEMPLATES.glob("*.json")}  # and no template is left unused


def test_a_view_naming_a_missing_template_is_refused():
    dvcfile.check_plot_templates([{"ok": {"template": "overlay"}}, {"dvc": {"template": "linear"}}])
    with pytest.raises(ConfigError, match=r"view 'passk': no template 'overlay-lg2' in .*plots \(gain-band"):
        dvcfile.check_plot_templates([{"passk": {"template": "overlay-lg2"}}], TEMPLATES)


def test_k_is_drawn_on_a_log2_axis():
    ks = {name: v for name, v in views().items() if v["x"] == "k"}
    assert set(ks) == {"passk", "passk-gain"}
    for name, view in ks.items():
        xs = [
            layer["encoding"]["x"] for layer in layers(template(view["template"])) if "x" in layer["encoding"]
        ]
        assert xs and all(x["scale"] == {"type": "log", "base": 2} for x in xs), name
    for name, view in views().items():
        if name not in ks:
            assert all(
                "scale" not in layer["encoding"].get("x", {}) for layer in layers(template(view["template"]))
            )


def test_every_band_in_the_curve_files_is_drawn_and_every_drawn_band_is_in_them():
    """A view draws bands exactly when its files carry them, and then each curve's file has a column
    the template reads for each end of the band."""
    drawn = set()
    for name, view in views().items():
        bands = band_columns(template(view["template"]))
        for path, field in curves(view):
            cols = header(path)
            has = f"{field}_lo" in cols or "ci95_lo" in cols
            assert has == (bands is not None), (name, path)
            if bands is not None:
                drawn.add(name)
                for end, names in bands.items():
                    assert any(n.format(field=field) in cols for n in names), (name, path, end, names)
    assert drawn == {"grpo-accuracy-chapter-a", "grpo-accuracy-chapter-b", "passk", "passk-gain"}


def test_band_columns_are_read_from_the_template():
    assert band_columns(template("overlay-band-log2")) == {
        "lo": ["{field}_lo", "ci95_lo"],
        "hi": ["{field}_hi", "ci95_hi"],
    }
    assert band_columns(template("overlay")) is None


def test_one_colour_per_curve_and_legends_below_that_do_not_cut_labels():
    for name, view in views().items():
        colours = [layer["encoding"].get("color") for layer in layers(template(view["template"]))]
        colours = [c for c in colours if c]  # the line at 0 has none
        assert colours and all(c == colours[0] for c in colours), name  # one scale, one legend
        palette = colours[0]["scale"]["range"]
        assert len(set(palette)) == len(palette) >= len(curves(view)), name
        legend = colours[0]["legend"]
        assert legend["orient"] == "bottom" and legend["labelLimit"] >= 300, name


# Inserted at the top of <body>: keep each view's vegaEmbed promise, drawn as SVG so that the legend's
# labels are in the DOM as drawn (a cut label ends in an ellipsis).
CAPTURE = """<script>
window.__embeds = [];
const __embed = window.vegaEmbed;
window.vegaEmbed = Object.assign((el, spec, opts) => {
  const p = __embed(el, spec, Object.assign({renderer: 'svg'}, opts));
  window.__embeds.push([el, p]);
  return p;
}, __embed);
</script>"""

# Before </body>: what each view drew, into the DOM that chromium dumps.
PROBE = """<script>
window.addEventListener('load', async () => {
  const out = {};
  try {
    for (const [el, p] of window.__embeds) {
      const v = (await p).view;
      const color = v.scale('color'), dom = color.domain();
      const r = {series: dom.length, colours: new Set(dom.map(d => color(d))).size, x: v.scale('x').type,
                 bands: 0, lines: 0};
      const walk = node => {  // one area and one line mark per series; their items are the points
        if (node.marktype === 'area' && node.items.some(i => (i.opacity ?? 1) > 0)) r.bands += 1;
        if (node.marktype === 'line' && node.items.length > 1) r.lines += 1;
        for (const c of node.items || []) walk(c);
      };
      walk(v.scenegraph().root);
      r.legends = {};
      for (const g of document.querySelectorAll(el + ' .role-legend')) {
        const title = g.querySelector('.role-legend-title text').textContent;
        r.legends[title] = [...g.querySelectorAll('.role-legend-label text')].map(t => t.textContent);
      }
      r.cut = Object.values(r.legends).flat().filter(t => t.includes('\\u2026'));
      out[el.slice(1)] = r;
    }
  } catch (e) { out.error = String(e); }
  const pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed (.ci/run installs it)")
def test_dvc_plots_render_offline_in_headless_chromium(tmp_path):
    """The page `dvc plots show` writes, opened with every host unresolvable: each view draws one line
    and one colour per curve, a band per curve where its files have them, k on a log axis, no legend
    label cut, and nothing on the console (a vega-lite spec for another vega major warns there)."""
    subprocess.run(
        [sys.executable, "-m", "dvc", "plots", "show", "-o", str(tmp_path / "plots")],
        cwd=plots_repo(tmp_path),
        check=True,
    )
    html = (tmp_path / "plots" / "index.html").read_text()
    body, end = html.rindex("<body>") + len("<body>"), html.rindex("</body>")
    page = tmp_path / "probe.html"
    page.write_text(html[:body] + CAPTURE + html[body:end] + PROBE + html[end:])
    drawn, console = probe(page, tmp_path / "profile", "1400,1500", 10000)
    assert "error" not in drawn, drawn
    for name, view in views().items():
        n = len(curves(view))
        banded = band_columns(template(view["template"])) is not None
        r = drawn[name]
        assert r["series"] == r["colours"] == r["lines"] == len(r["legends"]["curve"]) == n, (name, r)
        assert r["legends"]["revision"] == ["workspace"], (name, r)
        assert r["bands"] == (n if banded else 0), (name, r)
        assert r["x"] == ("log" if view["x"] == "k" else "linear"), (name, r)
        assert r["cut"] == [], (name, r)
    assert not console, console
