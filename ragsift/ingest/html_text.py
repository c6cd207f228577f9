"""The text of an HTML page, as ``ragsift ingest`` indexes it.

Documentation is often published as HTML (Sphinx, Javadoc, a help centre's
export). A page's text is what a reader sees of it: scripts, styles and the
page's chrome (``<nav>``, ``<header>``, ``<footer>``, ``<aside>``, anything with
``role="navigation"`` or a class such as ``header``, ``sidebar`` or ``breadcrumb``)
are left out, since every page repeats them and a chunk of menus would match
questions about nothing. So is a table of contents (``id="toc"``, a ``toc`` or
``toctree-wrapper`` class, texinfo's ``menu`` tables, pod2html's ``<ul
id="index">``): it repeats the page's headings, so a FAQ's list of its questions
would be the best match for each of them and answer none. Block elements
(paragraphs, headings, list items, table rows, ``<br>``) end a paragraph, so the
chunker cuts where the page does. Where leaving the chrome out leaves no text (a
page whose ``<header>`` is never closed), the whole body is read instead. A redirect page (``<meta
http-equiv="refresh">``, as texinfo writes one for every node name) is passed
over: a browser moves on before showing its text.

Bytes are decoded as the page declares (a UTF-16 byte order mark; ``<meta
charset>``, or ``charset=`` in a ``http-equiv`` content type, within its first
2 KiB), else as UTF-8; what cannot be
decoded becomes U+FFFD, as in text files.
"""

from __future__ import annotations

import codecs
import contextlib
import re
from html.parser import HTMLParser
from typing import NamedTuple

__all__ = ["HTML_SUFFIXES", "REDIRECT", "HtmlPage", "decode_html", "html_text"]

HTML_SUFFIXES = (".html", ".htm")
#: Why a redirect page is passed over (``ragsift ingest``'s ``skipped`` line).
REDIRECT = "redirect"

#: Elements whose content is never text a reader sees.
_NEVER = frozenset({"script", "style", "noscript", "template", "svg"})
#: The page's chrome: repeated on every page, left out unless nothing else is left.
_CHROME = frozenset({"nav", "header", "footer", "aside"})
#: Classes that mark chrome in generated documentation (texinfo's ``header`` tables,
#: Sphinx's ``related`` bars, ``sphinxsidebar`` and heading anchors, common theme names).
_CHROME_CLASSES = frozenset(
    {
        "breadcrumb", "breadcrumbs", "footer", "header", "headerlink", "nav", "navbar",
        "navigation", "related", "sidebar", "sphinxsidebar",
        # tables of contents: Sphinx's toctrees, texinfo's node menus, theme names
        "menu", "mini-toc", "table-of-contents", "toc", "toctree-wrapper",
    }
)  # fmt: skip
#: Ids of a table of contents (MediaWiki's and pandoc's ``toc``, Hugo's), and of a
#: list (``<ul>``, ``<ol>``) only, pod2html's ``index``.
_TOC_IDS = frozenset({"toc", "tableofcontents", "table-of-contents"})
_LISTS = frozenset({"ul", "ol"})
#: Elements that end a paragraph where they open and where they close.
_BLOCKS = frozenset(
    {
        "address", "article", "blockquote", "br", "caption", "dd", "details", "div",
        "dl", "dt", "figcaption", "figure", "form", "h1", "h2", "h3", "h4", "h5", "h6",
        "hr", "li", "main", "ol", "p", "pre", "section", "summary", "table", "tr",
        "ul",
    }
)  # fmt: skip
_CELLS = frozenset({"td", "th"})
#: Elements without an end tag: they never open a context to skip.
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
)
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_SPACES = re.compile(r"[ \t\r\f\v]+")
_BREAKS = re.compile(r"\n\s*\n\s*")


def decode_html(data: bytes) -> str:
    """``data`` as text: in the charset the page declares, else UTF-8 (with a BOM or not)."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", errors="replace")
    declared = _CHARSET.search(data[:2048])
    encoding = "utf-8-sig"
    if declared is not None:
        with contextlib.suppress(LookupError):  # one Python does not know: UTF-8
            encoding = codecs.lookup(declared.group(1).decode("ascii")).name
    if encoding == "utf-8":
        encoding = "utf-8-sig"
    try:
        return data.decode(encoding, errors="replace")
    except (LookupError, UnicodeError):  # no page's charset (rot13, base64, idna): UTF-8
        return data.decode("utf-8-sig", errors="replace")


class HtmlPage(NamedTuple):
    """What a page holds: its visible text, paragraphs apart; its title (``<title>``,
    else its first ``<h1>``; None without either); and whether it is a redirect
    (``<meta http-equiv="refresh">``), whose text a browser never shows."""

    text: str
    title: str | None
    redirect: bool = False


def html_text(page: str) -> HtmlPage:
    """What ``page`` holds (:class:`HtmlPage`)."""
    reader = _Reader(skip_chrome=True)
    reader.feed(page)
    reader.close()
    if not reader.text().strip() and reader.chrome_seen:
        reader = _Reader(skip_chrome=False)
        reader.feed(page)
        reader.close()
    return HtmlPage(reader.text(), reader.title(), reader.redirect)


def _is_toc_id(name: str, tag: str) -> bool:
    return name in _TOC_IDS or (name == "index" and tag in _LISTS)


class _Reader(HTMLParser):
    """Collects visible text; a skipped element is tracked by its tag and nesting depth."""

    def __init__(self, *, skip_chrome: bool):
        super().__init__(convert_charrefs=True)
        self.skip_chrome = skip_chrome
        self.chrome_seen = False
        self.redirect = False
        self._parts: list[str] = []
        self._skipping: tuple[str, int] | None = None  # (tag, depth of that tag inside)
        self._in_title = False
        self._title: list[str] = []
        self._in_h1 = False
        self._h1: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_title = False  # a title holds no elements: one left open ends here
        if tag == "meta" and any(
            k == "http-equiv" and (v or "").strip().lower() == "refresh" for k, v in attrs
        ):
            self.redirect = True
        if tag == "title":
            self._in_title = True
        if self._skipping is not None:
            skipped, depth = self._skipping
            if tag == skipped and tag not in _VOID:
                self._skipping = (skipped, depth + 1)
            return
        chrome = tag in _CHROME or any(
            (k == "role" and v == "navigation")
            or (k == "class" and not _CHROME_CLASSES.isdisjoint((v or "").lower().split()))
            or (k == "id" and _is_toc_id((v or "").lower(), tag))
            for k, v in attrs
        )
        if chrome:
            self.chrome_seen = True
        if (tag in _NEVER or (chrome and self.skip_chrome)) and tag not in _VOID:
            self._skipping = (tag, 1)
            return
        if tag == "h1" and self._h1 is None:
            self._in_h1, self._h1 = True, []
        if tag in _BLOCKS:
            self._parts.append("\n\n")
        elif tag in _CELLS:  # a table row's cells stay on its line
            self._parts.append(" ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skipping is None and tag in _BLOCKS:
            self._parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if self._skipping is not None:
            skipped, depth = self._skipping
            if tag == skipped:
                self._skipping = None if depth == 1 else (skipped, depth - 1)
            return
        if tag == "h1":
            self._in_h1 = False
        if tag in _BLOCKS:
            self._parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:  # the title is the document's title, not a line of its text
            self._title.append(data)
            return
        if self._skipping is not None:
            return
        if self._in_h1 and self._h1 is not None:
            self._h1.append(data)
        self._parts.append(data)

    def close(self) -> None:
        # A comment never closed runs to the end of the page, as a browser reads it;
        # HTMLParser would hand it over as text, markup and all.
        opened = self.rawdata.find("<!--")
        if opened >= 0 and "-->" not in self.rawdata[opened + 4 :]:
            self.rawdata = self.rawdata[:opened]
        super().close()

    def text(self) -> str:
        lines = (_SPACES.sub(" ", line).strip() for line in "".join(self._parts).split("\n"))
        return _BREAKS.sub("\n\n", "\n".join(lines)).strip()

    def title(self) -> str | None:
        for found in (self._title, self._h1 or []):
            title = " ".join("".join(found).split())
            if title:
                return title[:200]
        return None
