"""Sphinx configuration: MyST Markdown pages, the furo theme, autodoc from the docstrings, and
the pages ``_ext/jaxprc_docs.py`` generates from the code (grammar, primitives, verifier errors,
command-line session, differences from JAX, API reference) before each build."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

import jaxprc  # noqa: E402

project = "jaxprc"
author = "the jaxprc authors"
release = version = jaxprc.__version__
extensions = ["myst_parser", "sphinx.ext.autodoc", "jaxprc_docs"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "_generated", "_ext"]
html_theme = "furo"
html_title = f"jaxprc {release}"
myst_heading_anchors = 3
autodoc_member_order = "bysource"
autodoc_typehints = "none"          # signatures as written; JAX's annotations are not ours to render
nitpicky = False
toc_object_entries = False          # the API pages' objects stay out of the navigation (and its cost)
