"""The documentation site (docs/, `make docs`): what its tables of contents cover, that it is configured to build
offline, and (slow set) a full build with the gallery's saved outputs.
"""
import ast
import glob
import importlib.util
import os
import re
import subprocess
import sys

import pytest

from tests.helpers import ROOT

DOCS = os.path.join(ROOT, "docs")
GALLERY = os.path.join(ROOT, "gallery")


def toctree_entries(page):
    """The entries of every ``{toctree}`` block of a MyST page (options and blank lines skipped), after the build
    has written the families' entries in (docs/conf.py)."""
    text = load_conf().expand_families(open(os.path.join(DOCS, page), encoding="utf-8").read())
    entries = []
    for block in re.findall(r"```\{toctree\}\n(.*?)```", text, flags=re.S):
        entries += [line.strip() for line in block.splitlines() if line.strip() and not line.startswith(":")]
    return entries


def stems(pattern, folder):
    return sorted(os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(folder, pattern)))


def conf_assignments():
    """The literal values assigned at the top level of docs/conf.py (expressions that are not literals skipped)."""
    tree = ast.parse(open(os.path.join(DOCS, "conf.py"), encoding="utf-8").read())
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    try:
                        values[target.id] = ast.literal_eval(node.value)
                    except ValueError:
                        values[target.id] = None
    return values


def load_conf():
    spec = importlib.util.spec_from_file_location("bayeszoo_docs_conf", os.path.join(DOCS, "conf.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------- tables of contents
def test_the_landing_page_reaches_every_section():
    assert toctree_entries("index.md") == ["install", "guide/index", "families/index", "suites/index",
                                           "gallery/index", "api/index", "benchmarks", "architecture", "references"]


def test_every_suite_page_is_in_the_suites_toctree():
    pages = [s for s in stems("*.md", os.path.join(DOCS, "suites")) if s != "index"]
    assert pages and sorted(toctree_entries("suites/index.md")) == pages


def test_every_family_page_is_in_the_families_toctree():
    pages = [s for s in stems("*.md", os.path.join(DOCS, "families")) if s != "index"]
    assert len(pages) >= 7, pages
    assert sorted(toctree_entries("families/index.md")) == pages


def test_every_gallery_notebook_is_in_the_gallery_toctree():
    notebooks = stems("*.ipynb", GALLERY)
    assert {"own_data", "dask_grid"} <= set(notebooks)
    assert sorted(toctree_entries("gallery/index.md")) == notebooks


def test_every_guide_page_is_in_the_guide_toctree():
    pages = [s for s in stems("*.md", os.path.join(DOCS, "guide")) if s != "index"]
    assert sorted(toctree_entries("guide/index.md")) == pages


def test_every_new_gallery_notebook_has_a_generator():
    for name in ("own_data", "dask_grid"):
        assert os.path.isfile(os.path.join(GALLERY, f"make_{name}_notebook.py")), name


# ------------------------------------------------------------------------------------------- offline
def test_conf_has_no_intersphinx_and_an_offline_theme():
    conf = conf_assignments()
    assert "sphinx.ext.intersphinx" not in conf["extensions"]
    assert not any(name.startswith("intersphinx") for name in conf)
    assert conf["html_theme"] == "pydata_sphinx_theme"
    options = conf["html_theme_options"]
    assert options["icon_links"] == [] and options["analytics"] == {} and options["github_url"] is None
    assert conf["nb_ipywidgets_js"] == {}            # myst-nb would load the widget scripts from a CDN
    assert "mathjax_path" not in conf                # the default is refused on a page with maths (conf.py)
    assert conf["nb_execution_mode"] == "cache" and conf["nb_execution_raise_on_error"] is True


def test_execution_cache_is_under_the_build_folder():
    conf = load_conf()
    assert os.path.commonpath([conf.nb_execution_cache_path, os.path.join(DOCS, "_build")]) == \
        os.path.join(DOCS, "_build")


def test_repository_links_are_rewritten_to_site_pages():
    """The Markdown files link to each other by repository path (right on the code host); on the site each of
    those files is a page."""
    conf = load_conf()
    families, benchmarks = os.path.join(DOCS, "families"), DOCS
    text = ("[a](../../BENCHMARKS.md#rvm-measurements) [b](../../README.md#backends-and-their-options) "
            "[c](../references.md) [d](arvm.md#inputs) [e](https://example.org/x.md) [f](#known-failures) "
            "[g](../../DATASETS.md) [h](../../models/rvm.py)")
    assert conf._relink(text, families, families) == (
        "[a](../benchmarks.md#rvm-measurements) [b](../guide/fit.md#backends-and-their-options) "
        "[c](../references.md) [d](arvm.md#inputs) [e](https://example.org/x.md) [f](#known-failures) "
        "[g](../guide/datasets.md) [h](../../models/rvm.py)")
    # BENCHMARKS.md is included by docs/benchmarks.md: its links are written from the repository root
    assert conf._relink("[a](docs/families/bid.md) [b](docs/families/) [c](#imagervm)", ROOT, benchmarks) == \
        "[a](families/bid.md) [b](families/index.md) [c](#imagervm)"


MARKDOWN = [os.path.join(ROOT, name) for name in ("README.md", "BENCHMARKS.md", "DATASETS.md")] + \
    glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True)
LINK = re.compile(r"\]\(([^)\s]*?)#([^)\s]+)\)")


def heading_anchors(path):
    """The anchors MyST gives the headings of a Markdown file (``myst_heading_anchors`` levels, its slugs; a
    repeated heading gets -1, -2, ...), headings inside code fences skipped."""
    from mdit_py_plugins.anchors.index import slugify

    depth = conf_assignments()["myst_heading_anchors"]
    text = re.sub(r"^```.*?^```", "", open(path, encoding="utf-8").read(), flags=re.S | re.M)
    anchors, seen = set(), {}
    for hashes, title in re.findall(r"^(#{1,6})\s+(.+?)\s*$", text, flags=re.M):
        if len(hashes) <= depth:
            slug = slugify(title)
            anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return anchors


@pytest.mark.parametrize("path", sorted(MARKDOWN), ids=lambda p: os.path.relpath(p, ROOT))
def test_every_link_to_a_heading_finds_it(path):
    """A renamed heading breaks every link to it; the site build reports them, this finds them in a second."""
    broken = []
    for target, anchor in LINK.findall(open(path, encoding="utf-8").read()):
        if "://" in target or (target and not target.endswith(".md")):
            continue
        file = os.path.normpath(os.path.join(os.path.dirname(path), target)) if target else path
        if os.path.exists(file) and anchor not in heading_anchors(file):
            broken.append(f"{target}#{anchor}")
    assert not broken, f"{os.path.relpath(path, ROOT)} links to headings that are not there: {broken}"


# --------------------------------------------------------------------------------------- full build (slow)
REMOTE = re.compile(r"<(?:script|link)\b[^>]*\b(?:src|href)\s*=\s*[\"'](?:https?:)?//", re.I)


@pytest.mark.slow
def test_site_builds_offline_without_warnings(tmp_path):
    """`sphinx -W` with the notebooks' saved outputs (execution off): every page builds, nothing loads from the
    network, and the API and gallery pages are there (measured: about 40 s on two cores)."""
    out = tmp_path / "html"
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", "-q", "-D", "nb_execution_mode=off",
         "-d", str(tmp_path / "doctrees"), DOCS, str(out)],
        capture_output=True, text=True, timeout=900, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-5000:]
    assert (out / "index.html").is_file()

    api = (out / "api" / "generated" / "bayeszoo.fit.html").read_text(encoding="utf-8")
    assert 'id="bayeszoo.fit"' in api and "Parameters" in api        # the function, documented by numpydoc

    gallery = (out / "gallery" / "own_data.html").read_text(encoding="utf-8")
    assert re.search(r"<img [^>]*src=\"[^\"]+\.png\"", gallery)          # a figure from the saved outputs
    assert "<table" in gallery

    pages = sorted(out.rglob("*.html"))
    assert len(pages) > 30
    remote = {str(p.relative_to(out)): REMOTE.findall(p.read_text(encoding="utf-8")) for p in pages}
    assert not {page: tags for page, tags in remote.items() if tags}
