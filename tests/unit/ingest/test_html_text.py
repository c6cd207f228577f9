"""HTML pages read as the text a reader sees of them."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragsift.errors import InvalidEventError
from ragsift.ingest.chunking import Chunker
from ragsift.ingest.html_text import decode_html, html_text
from ragsift.ingest.loaders import iter_documents

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Returns &amp; refunds</title>
<style>p { color: red }</style><script>var s = "<p>not text</p>";</script></head>
<body>
<nav><a href="/">Home</a> | <a href="/next">Next</a></nav>
<header><div class="logo">Acme Docs</div></header>
<h1>Returning a thermostat<a class="headerlink" href="#r">¶</a></h1>
<p>You have <b>30 days</b> to return
   a thermostat.<br>Keep the box.</p>
<ul><li>Pack it<li>Ship it</ul>
<table><tr><th>Plan</th><th>Days</th></tr><tr><td>Basic</td><td>30</td></tr></table>
<div role="navigation"><div>Previous</div><div>Next</div> page links</div>
<noscript>Enable JavaScript</noscript>
<aside>Related: warranties</aside>
<table class="header"><tr><td>[ &lt;&lt; ]</td><td>[ Up ]</td></tr></table>
<div class="sphinxsidebar side"><div><p>Search</p></div></div>
<div class="section-header">Kept: not a chrome class</div>
<footer>&copy; Acme</footer>
</body></html>"""


def test_a_page_reads_as_its_visible_text_in_paragraphs() -> None:
    text, title, redirect = html_text(PAGE)
    assert not redirect
    assert title == "Returns & refunds"
    assert text.split("\n\n") == [
        "Returning a thermostat",
        "You have 30 days to return\na thermostat.",
        "Keep the box.",
        "Pack it",
        "Ship it",
        "Plan Days",
        "Basic 30",
        "Kept: not a chrome class",
    ]


@pytest.mark.parametrize(
    ("page", "text", "title"),
    [
        # no <title>: the first <h1>
        (
            "<h1>Heat  pumps</h1><p>Orbit works with them.</p>",
            "Heat pumps\n\nOrbit works with them.",
            "Heat pumps",
        ),
        # neither: no title (the loader names the document by its file)
        ("<p>Just text</p>", "Just text", None),
        # </head> left out, as HTML allows: the body is still read
        ("<html><head><title>T</title><body><p>Body</p>", "Body", "T"),
        # chrome never closed: leaving it out leaves nothing, so the page is read whole
        ("<header><h1>Only</h1><p>text", "Only\n\ntext", "Only"),
        # nested chrome of one tag closes at its own end tag
        ("<nav><nav>a</nav>b</nav><p>kept</p>", "kept", None),
        # character references, and markup inside words
        ("<p>caf&eacute; &lt;tag&gt; z<i>s</i>h</p>", "café <tag> zsh", None),
        # self-closing breaks end a paragraph
        ("<p>one<br/>two</p>", "one\n\ntwo", None),
        # a script never closed swallows the rest, as browsers read it
        ("<p>before</p><script>x = 1; <p>after</p>", "before", None),
        # a table of contents repeats the headings: pod2html's list, MediaWiki's, texinfo's
        # menu; an element merely named "index" that is no list stays
        (
            '<ul id="index"><li>How do I sort?</li></ul><h2>How do I sort?</h2><p>Use sort.</p>',
            "How do I sort?\n\nUse sort.",
            None,
        ),
        (
            '<div id="TOC"><p>1 Intro</p></div><div class="Toc"><p>2 Use</p></div><p>kept</p>',
            "kept",
            None,
        ),
        ('<table class="menu"><tr><td>Node</td></tr></table><p>kept</p>', "kept", None),
        ('<div id="index"><p>the main text</p></div>', "the main text", None),
        # a comment never closed runs to the end, as browsers read it; a closed one ends
        ("<p>kept</p><!-- note <p>hidden</p>", "kept", None),
        ("<p>a</p><!-- one --><p>b</p><!-- two", "a\n\nb", None),
        # a title never closed ends where the page's first element opens
        ("<title>Oops<p>Body text</p>", "Body text", "Oops"),
        ("", "", None),
    ],
)
def test_edge_cases(page: str, text: str, title: str | None) -> None:
    assert html_text(page) == (text, title, False)


def test_bytes_are_decoded_as_the_page_declares() -> None:
    latin = '<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1"><p>café</p>'
    assert html_text(decode_html(latin.encode("latin-1")))[0] == "café"
    assert html_text(decode_html("<meta charset='UTF-8'><p>café</p>".encode()))[0] == "café"
    assert decode_html("<p>café</p>".encode("utf-16")) == "<p>café</p>"
    # with a BOM and no declaration: UTF-8, the BOM dropped
    assert decode_html("\ufeff<p>é</p>".encode()) == "<p>é</p>"
    # a charset Python does not know: UTF-8, what fails to decode replaced
    assert (
        decode_html(b'<meta charset="klingon"><p>\xff</p>')
        == '<meta charset="klingon"><p>\ufffd</p>'
    )


@pytest.mark.parametrize("charset", ["rot13", "base64", "zlib", "undefined", "idna"])
def test_a_charset_no_page_is_written_in_reads_as_utf8(charset: str) -> None:
    # Python knows these codecs, but not as text encodings (or they refuse any text):
    # decoding raised LookupError or UnicodeError, and one such page stopped an ingest.
    page = f'<meta charset="{charset}"><p>café</p>'
    assert html_text(decode_html(page.encode()))[0] == "café"


def test_the_loader_indexes_html_files_by_their_text(tmp_path: Path) -> None:
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "returns.html").write_text(PAGE, encoding="utf-8")
    (tmp_path / "empty.htm").write_text("<html><script>only()</script></html>", encoding="utf-8")
    (tmp_path / "untitled.HTML").write_text("<p>No title here.</p>", encoding="utf-8")
    (tmp_path / "moved.html").write_text(
        '<html><head><meta http-equiv="Refresh" content="0; url=guide/returns.html">'
        "<title>Moved</title></head><body><p>The page you are looking for is at"
        ' <a href="guide/returns.html">Returns</a>.</p></body></html>',
        encoding="utf-8",
    )
    skipped: list[tuple[Path, str]] = []
    docs = {d.doc_id: d for d in iter_documents(tmp_path, skipped=skipped)}
    assert set(docs) == {"guide-returns.html", "untitled.HTML"}
    page = docs["guide-returns.html"]
    assert page.title == "Returns & refunds"
    assert page.source == "guide/returns.html"
    chrome = (
        "<",
        "not text",
        "Acme",
        "Home",
        "Previous",
        "JavaScript",
        "warranties",
        "Up",
        "Search",
    )
    for hidden in chrome:
        assert hidden not in page.text
    assert docs["untitled.HTML"].title == "untitled"
    assert skipped == [(tmp_path / "empty.htm", "empty"), (tmp_path / "moved.html", "redirect")]
    # the chunker cuts where the page does: between paragraphs, never inside one
    chunks = [c.text for c in Chunker(max_chars=60, overlap_chars=0).split(page.doc_id, page.text)]
    assert len(chunks) > 1
    for paragraph in page.text.split("\n\n"):
        assert any(" ".join(paragraph.split()) in chunk for chunk in chunks)
    # one file given by name is read as HTML too; an unsupported one still refused
    assert [d.doc_id for d in iter_documents(tmp_path / "untitled.HTML")] == ["untitled.HTML"]
    (tmp_path / "page.xhtml").write_text("<p>x</p>", encoding="utf-8")
    with pytest.raises(InvalidEventError, match=r"unsupported file type '\.xhtml'"):
        list(iter_documents(tmp_path / "page.xhtml"))


_PIECES = [
    *"<>/=\"' abp!-&;#x\n",
    *("<p>", "</p>", "<nav>", "</nav>", "<script>", "</script>", "<br>", "&amp;"),
    *("<h1>", "</h1>", "<!--", "-->", "<title>", "</title>", "é", "<td>", "&#0;"),
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=60).map("".join))
def test_any_markup_reads_to_text_without_raising(page: str) -> None:
    text, title, _ = html_text(page)
    assert text == text.strip()
    assert "\n\n\n" not in text
    assert title is None or 0 < len(title) <= 200
