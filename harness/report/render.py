"""Writing the site: the jinja2 environment, shared page context, data tables.

A page is a :class:`Page` (path under ``out``, template, depth, context) made by
a page module; :class:`Renderer` renders it with the navigation shared by every
page of that depth. Templates receive finished numbers and strings
(autoescape on, undefined names are errors).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import jinja2

from harness.report import fmt as F
from harness.report.model import SiteModel


def site_root() -> Path:
    """Folder holding ``templates/`` and ``static/``.

    Installed from a wheel, they ship as ``harness/report/assets`` (pyproject's
    package-dir maps the repository's ``site/`` there); in a source checkout or
    an editable install they are read from ``site/`` itself. Raises
    ``FileNotFoundError`` naming both places when neither has them.
    """
    here = Path(__file__).resolve().parent
    for root in (here / "assets", here.parent.parent / "site"):
        if (root / "templates" / "base.html").is_file():
            return root
    raise FileNotFoundError(
        f"kernelwatch site templates not found in {here / 'assets'} nor {here.parent.parent / 'site'}"
    )


SITE_ROOT = site_root()


def environment() -> jinja2.Environment:
    """The jinja2 environment of the site (``fmt``, ``pct`` and ``tojson_sorted`` filters)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(SITE_ROOT / "templates")),
        autoescape=jinja2.select_autoescape(["html", "xml", "j2"], default_for_string=True, default=True),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["fmt"] = F.fmt
    env.filters["pct"] = F.pct
    # Units people read and guard statuses (issue 13): a figure with a status is a badge.
    env.filters["badge"] = F.badge
    env.filters["util"] = F.util
    env.filters["flops_rate"] = F.flops_rate
    env.filters["gib"] = F.gib
    env.filters["plural"] = F.plural  # {{ n|plural("point") }}: "1 point", "2 points"
    env.filters["tojson_sorted"] = lambda v: jinja2.utils.htmlsafe_json_dumps(v, dumps=F.dumps)
    return env


@dataclass
class Page:
    """One output file: ``path`` relative to ``out``, its ``template``, the
    relative ``root`` of the site seen from it (``""`` or ``"../"``), and the
    template ``context``."""

    path: str
    template: str
    root: str
    context: dict


class Renderer:
    """Renders :class:`Page` objects into ``out`` for one model."""

    def __init__(self, out: Path, model: SiteModel):
        self.out = out
        self.env = environment()
        self._nav: dict[str, str] = {}
        self._machines_nav = [{"name": m, "slug": model.mslug[m]} for m in model.machines]
        self._device_noun = model.device_noun

    def base(self, root: str) -> dict:
        """Context every page shares; the navigation is rendered once per depth (10,000 commit pages)."""
        nav = self._nav.get(root)
        if nav is None:
            nav = self._nav[root] = jinja2.utils.markupsafe.Markup(
                self.env.get_template("_nav.html").render(
                    root=root, machines_nav=self._machines_nav, device_noun=self._device_noun
                )
            )
        return {"root": root, "nav": nav}

    def write(self, page: Page) -> None:
        text = self.env.get_template(page.template).render(**self.base(page.root), **page.context)
        # backslashreplace: a lone surrogate (a folder name of non-UTF-8 bytes) is
        # written as the text \udcff, never a UnicodeEncodeError losing the site
        (self.out / page.path).write_text(boxed_tables(text), encoding="utf-8", errors="backslashreplace")


def write_tables(out: Path, model: SiteModel) -> None:
    """``data/commits.js`` (the commit table) and ``data/m/<machine>.js`` (each
    machine's commits as indices into it)."""
    data = {
        "hash": [c["hash"] for c in model.commits],
        "date": [c["date"] for c in model.commits],
        "subject": [c["subject"] for c in model.commits],
        "author": [c["author"] for c in model.commits],
    }
    (out / "data" / "commits.js").write_text(f'KW.put("commits",{F.dumps(data)});\n', encoding="utf-8")
    for m in model.machines:
        key = f"m/{model.mslug[m]}"
        (out / "data" / f"{key}.js").write_text(
            f'KW.put("{key}",{F.dumps({"machine": m, "commits": F.b64(model.maps[m], "<i4")})});\n', encoding="utf-8"
        )


def boxed_tables(html: str) -> str:
    """Every ``<table>`` of a page inside ``<div class="table-box">`` (``style.css``:
    ``overflow-x: auto``), so a table wider than the page scrolls inside its box
    instead of spilling over the page (issue 25: tables spilled at 800 px)."""
    return re.sub(r"</table>", "</table></div>", re.sub(r"<table\b", '<div class="table-box"><table', html))
