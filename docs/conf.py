"""Sphinx configuration of the bayeszoo documentation site (`make docs`).

The site builds offline: no intersphinx, no external icons, fonts, analytics or widget scripts, and MathJax is
not loaded from a CDN. The gallery notebooks live in ``gallery/`` (where they are written and tested) and are
copied into ``docs/gallery/`` at build time; myst-nb executes them into a cache under ``docs/_build``, or shows the
outputs saved in them when run with ``-D nb_execution_mode=off``.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
from importlib import metadata

DOCS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(DOCS)
GALLERY = os.path.join(ROOT, "gallery")
sys.path.insert(0, ROOT)

# the notebook kernels inherit this: one BLAS thread per process on a small machine (MPLBACKEND is left unset: a
# kernel started with it set does not use its inline backend, and the notebooks would show no figures)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from sphinx.errors import ExtensionError  # noqa: E402

project = "bayeszoo"
author = "the bayeszoo developers"
copyright = "the bayeszoo developers"
version = release = metadata.version("bayeszoo")

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_nb",
]

exclude_patterns = ["_build", "**.ipynb_checkpoints", "api/_templates"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}   # .rst first: autosummary writes its stubs in it
root_doc = "index"
suppress_warnings = []    # every warning is an error under -W; nothing is silenced wholesale

# ------------------------------------------------------------------------------------------------- MyST
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 4          # GitHub-style anchors, as the Markdown pages link to them on the code host too

# ------------------------------------------------------------------------------------------ notebooks
nb_execution_mode = "cache"
nb_execution_cache_path = os.path.join(DOCS, "_build", "jupyter_cache")
nb_execution_timeout = 900        # per cell; a gallery notebook runs in a minute or two
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_in_temp = True       # notebooks that write runs/... do so in a scratch folder, not in the sources
nb_merge_streams = True
nb_ipywidgets_js = {}             # no widget scripts from a CDN (the notebooks show no widgets)

# --------------------------------------------------------------------------------------- API reference
autosummary_generate = True
templates_path = ["api/_templates"]   # a class page documents its public methods in full, in source order
autosummary_imported_members = False
autodoc_typehints = "none"        # numpydoc's Parameters sections carry the types
autodoc_default_options = {"members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_attributes_as_param_list = True

# ----------------------------------------------------------------------------------------------- HTML
html_theme = "pydata_sphinx_theme"
html_title = "bayeszoo"
html_static_path = ["_static"]
html_css_files = ["bayeszoo.css"]   # notebook pages: room for their tables
html_show_sourcelink = False
html_copy_source = False
html_theme_options = {
    "icon_links": [],                 # the default icons would load nothing, but stay explicit
    "github_url": None,
    "analytics": {},
    "navbar_end": ["theme-switcher"],
    "footer_start": ["copyright"],
    "footer_end": [],
    "header_links_before_dropdown": 6,
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "use_edit_page_button": False,
}
html_context = {"default_mode": "light"}


# ------------------------------------------------------------------------------- the gallery notebooks
def copy_gallery(app, config) -> None:
    """Copy ``gallery/*.ipynb`` beside ``docs/gallery/index.md`` (an unchanged notebook keeps its file time, so
    Sphinx does not reread it)."""
    target = os.path.join(DOCS, "gallery")
    for name in sorted(os.listdir(GALLERY)):
        if not name.endswith(".ipynb"):
            continue
        src, dst = os.path.join(GALLERY, name), os.path.join(target, name)
        if not os.path.exists(dst) or open(src, "rb").read() != open(dst, "rb").read():
            shutil.copy2(src, dst)


def inline_kernels(app, config) -> None:
    """Start the notebook kernels with matplotlib's inline backend, so that a Figure ending a cell (bayeszoo's
    plots are made without pyplot) shows as a picture, as in the notebooks' saved outputs (gallery/_notebook.py
    passes --matplotlib=inline). myst-nb takes no kernel arguments, so the setting goes in the kernels' IPython
    profile, kept under the build folder."""
    ipython_dir = os.path.join(DOCS, "_build", "ipython")
    os.makedirs(os.path.join(ipython_dir, "profile_default"), exist_ok=True)
    with open(os.path.join(ipython_dir, "profile_default", "ipython_kernel_config.py"), "w") as fh:
        fh.write('c.IPKernelApp.matplotlib = "inline"\n')
    os.environ["IPYTHONDIR"] = ipython_dir


# ------------------------------------------------------------------- what the families' declarations give
# A family is declared once (``FAMILY = Family(...)`` in its model module, docs/architecture.md "Adding a family");
# the pages that list the families are written with markers that the build replaces by what the declarations and
# the backend registry say, so that no page holds a list of families by hand:
#   ```{families-table}```   the table of the families (page, class, source, hand-written backends)
#   ```{families-guide}```   the models guide's table (key, class, what it is, page)
#   {family-pages}           toctree entries: the family pages
#   {family-notebooks}       toctree entries: the families' gallery notebooks
#   {family-classes}         autosummary entries: the families' model classes
_FAMILIES_TABLE = re.compile(r"^```\{families-(table|guide)\}\n```$", re.M)
_FAMILY_LIST = re.compile(r"^([ \t]*)\{family-(pages|notebooks|classes)\}$", re.M)


def families_table() -> str:
    """The Markdown table of the families: page, class, source and the backends of its own package."""
    import bayeszoo as bz
    from bayeszoo import registry

    rows = ["| family | class | source | hand-written backends |", "|---|---|---|---|"]
    for key, family in bz.models.families().items():
        own = [b.name for b in registry.all_backends()
               if b.family == key and b.run.__module__.startswith(family.backends + ".")]
        rows.append(f"| [{key}]({key}.md) | `bz.models.{family.model.__name__}` | {family.source} | "
                    f"{', '.join(f'`{name}`' for name in own)} |")
    return "\n".join(rows)


def families_guide_table() -> str:
    """The models guide's Markdown table: key, class (cross-referenced to the API page), what it is, page."""
    import bayeszoo as bz

    rows = ["| family | class | what it is | page |", "|---|---|---|---|"]
    for key, family in bz.models.families().items():
        name = family.model.__name__
        rows.append(f"| `{key}` | {{class}}`bz.models.{name} <bayeszoo.models.{name}>` | {family.about} | "
                    f"[{key}](../families/{key}.md) |")
    return "\n".join(rows)


def family_entries(kind: str) -> list[str]:
    """One line per family: its page (``pages``), notebook (``notebooks``, families that have one) or class."""
    import bayeszoo as bz

    found = bz.models.families().values()
    if kind == "pages":
        return [family.key for family in found]
    if kind == "notebooks":
        return [family.gallery for family in found if family.gallery]
    return [family.model.__name__ for family in found]


def expand_families(text: str) -> str:
    """``text`` with the family markers replaced (see above)."""
    text = _FAMILIES_TABLE.sub(lambda m: families_table() if m.group(1) == "table" else families_guide_table(), text)
    return _FAMILY_LIST.sub(lambda m: "\n".join(m.group(1) + line for line in family_entries(m.group(2))), text)


def expand_family_markers(app, docname, source) -> None:
    source[0] = expand_families(source[0])


def generate_family_stubs(app) -> None:
    """autosummary writes the API pages from the sources as they are on disk, where the API page names the
    families' classes by a marker: it is also given that page with the classes written in (under the build folder,
    its stubs' folder made absolute)."""
    from sphinx.ext.autosummary.generate import generate_autosummary_docs

    page = os.path.join(DOCS, "api", "index.md")
    text = expand_families(open(page, encoding="utf-8").read())
    text = text.replace(":toctree: generated", ":toctree: " + os.path.join(DOCS, "api", "generated"))
    expanded = os.path.join(DOCS, "_build", "api_with_families.md")
    os.makedirs(os.path.dirname(expanded), exist_ok=True)
    with open(expanded, "w", encoding="utf-8") as fh:
        fh.write(text)
    generate_autosummary_docs([expanded], suffix=".rst", base_path=app.srcdir, app=app,
                              imported_members=app.config.autosummary_imported_members,
                              overwrite=app.config.autosummary_generate_overwrite,
                              encoding=app.config.source_encoding)


# ---------------------------------------------------------------- links between the repository's files
# The Markdown files are written to be read on the code host too, so they link to each other by repository
# path (../../BENCHMARKS.md#rvm-measurements). On the site each of those files is a page of its own.
SITE_PAGES = {
    "README.md": "guide/fit.md",            # the family pages link to its table of the generic backends' options
    "BENCHMARKS.md": "benchmarks.md",
    "DATASETS.md": "guide/datasets.md",
    "docs": "index.md",
}
_LINK = re.compile(r"\]\(([^)\s#]+)(#[^)\s]*)?\)")


def _site_target(path: str) -> str | None:
    """The site page (path under docs/) of a repository file or folder, or None if it is not one."""
    rel = os.path.relpath(path, ROOT)
    if rel in SITE_PAGES:
        return SITE_PAGES[rel]
    if rel.startswith("docs" + os.sep):
        inside = os.path.relpath(path, DOCS)
        return os.path.join(inside, "index.md") if os.path.isdir(path) else inside
    return None


def _relink(text: str, source_dir: str, doc_dir: str) -> str:
    """Rewrite the relative links of ``text`` (written in ``source_dir``) to the site page each file has, relative
    to the document's folder ``doc_dir``; external links, anchors and other files are left as they are."""
    def replace(match):
        target, anchor = match.group(1), match.group(2) or ""
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            return match.group(0)
        page = _site_target(os.path.normpath(os.path.join(source_dir, target)))
        if page is None:
            return match.group(0)
        return f"]({os.path.relpath(os.path.join(DOCS, page), doc_dir)}{anchor})"
    return _LINK.sub(replace, text)


def relink_source(app, docname, source) -> None:
    path = app.env.doc2path(docname)
    if str(path).endswith(".md"):
        source[0] = _relink(source[0], os.path.dirname(path), os.path.dirname(path))


def relink_include(app, relative_path, parent_docname, content) -> None:
    included = os.path.normpath(os.path.join(app.srcdir, str(relative_path)))
    parent_dir = os.path.dirname(app.env.doc2path(parent_docname))
    content[0] = _relink(content[0], os.path.dirname(included), parent_dir)


def refuse_remote_mathjax(app, pagename, templatename, context, doctree) -> None:
    """Sphinx loads MathJax from a CDN on a page with mathematics; the pages write formulas in plain text."""
    if context.get("has_maths_elements") and "://" in app.config.mathjax_path:
        raise ExtensionError(f"{pagename}: mathematics markup would load MathJax from {app.config.mathjax_path}; "
                             "write the formula in plain text")


def setup(app):
    app.connect("html-page-context", refuse_remote_mathjax, priority=100)
    app.connect("config-inited", copy_gallery)
    app.connect("config-inited", inline_kernels)
    app.connect("builder-inited", generate_family_stubs)
    app.connect("source-read", expand_family_markers)
    app.connect("source-read", relink_source)
    app.connect("include-read", relink_include)
