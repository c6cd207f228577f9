"""Write a FAQ (Debian's, Python's, zsh's or Perl's) as a BEIR folder: its headings ask.

    apt-get install debian-faq          # Debian's package: the FAQ as text
    python scripts/faq_questions.py /tmp/faq [--holes 0.25] [--out-of-scope N]
    apt-get install python3-doc         # Python's FAQ, as reStructuredText
    python scripts/faq_questions.py /tmp/pyfaq --faq python [--holes 0.25]
    apt-get install zsh-doc             # zsh's FAQ and manual, as HTML
    python scripts/faq_questions.py /tmp/zshfaq --faq zsh [--manual] [--holes 0.25]
    apt-get install perl-doc            # perlfaq1-9, as POD
    python scripts/faq_questions.py /tmp/perlfaq --faq perl [--holes 0.25]
    ragsift eval --dataset /tmp/faq --out-of-scope /tmp/faq/out-of-scope.jsonl \\
        --artifact A --near-miss-negatives --json

A second set of questions in words their documents do not repeat, beside the
handbook's (``scripts/handbook_questions.py``), and not written for ragsift: the
FAQ's authors asked each question as a heading and answered it in the section's
body. The corpus holds the bodies without their headings, so a question meets
its answer in the answer's words, as a user's question would. Cross-references
that quote another section's heading ("Section 12.1, “What other
documentation exists...”") keep the number and lose the quote.

* in scope: every section heading that asks (holds a "?"), judged 1 against its body
  (a subsection's body joins its section's);
* near misses, with ``--holes F``: a seeded share F of those sections is left
  out of the corpus, and their questions are judged 0 against the section before
  them (on the same subjects, without the answer);
* out of scope (``out-of-scope.jsonl``): N (default 300) seeded questions of
  SQuAD's ``test-v2.0.json`` (``RAGSIFT_SQUAD2_DIR``, ``../shared/data/squad2``
  by default), Wikipedia questions a Debian FAQ cannot answer.

The Debian FAQ is read from ``/usr/share/doc/debian/FAQ/debian-faq.en.txt.gz``
(``RAGSIFT_DEBIAN_FAQ`` for another copy): about a hundred questions. Python's
(``--faq python``) is read from the reStructuredText sources python3-doc ships,
``/usr/share/doc/python3.11/html/_sources/faq`` (``RAGSIFT_PYTHON_FAQ``): about
170 questions on programming in Python, in programmers' words, with their
markup reduced to its text. Zsh's (``--faq zsh``) is read from the HTML zsh-doc
ships, ``/usr/share/doc/zsh-common/html/FAQ0[1-6].html`` (``RAGSIFT_ZSH_FAQ`` for
the folder), as ``ragsift ingest`` reads HTML: 55 questions on using the shell;
``--manual`` adds the manual's pages beside them to the corpus (every page but the
FAQ's), so an answer is found among a whole documentation set's. Quote counts
beside rates. Never fitted on.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
from pathlib import Path

from beir_folder import write_folder

FAQ = Path(os.environ.get("RAGSIFT_DEBIAN_FAQ", "/usr/share/doc/debian/FAQ/debian-faq.en.txt.gz"))
PYTHON_FAQ = Path(
    os.environ.get("RAGSIFT_PYTHON_FAQ", "/usr/share/doc/python3.11/html/_sources/faq")
)
ZSH_FAQ = Path(os.environ.get("RAGSIFT_ZSH_FAQ", "/usr/share/doc/zsh-common/html"))
PERL_FAQ = Path(os.environ.get("RAGSIFT_PERL_FAQ", "/usr/share/perl/5.36.0/pod"))
SQUAD = Path(os.environ.get("RAGSIFT_SQUAD2_DIR", "../shared/data/squad2"))
_CHAPTER = re.compile(r"^Chapter\s\d+\.\s")
_HEADING = re.compile(r"^(\d+)\.(\d+)((?:\.\d+)*)\.\s(.*)$")
# A cross-reference quotes the heading it points at: keep the number, drop the quote.
_QUOTED = re.compile(r"(Section \d+(?:\.\d+)*), “[^”]*”")


def sections(text: str) -> list[tuple[str, str, str]]:
    """The FAQ's sections in order: id (``1.2``), heading, body (subsections joined)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if _CHAPTER.match(line))
    out: list[tuple[str, list[str], list[str]]] = []
    in_heading = False  # a heading may wrap onto the unindented lines after it
    for line in lines[start:]:
        m = _HEADING.match(line)
        if _CHAPTER.match(line) or not line.strip():
            in_heading = False
        elif m and not m[3]:  # a section: N.M.
            out.append((f"{m[1]}.{m[2]}", [m[4].strip()], []))
            in_heading = True
        elif m and out:  # a subsection (N.M.K.) joins its section, heading and all
            out[-1][2].append(m[4].strip())
        elif out and in_heading and not line.startswith(" "):
            out[-1][1].append(line.strip())
        elif out:
            out[-1][2].append(line.strip())
    return [
        (sid, " ".join(head), _QUOTED.sub(r"\1", " ".join(body))) for sid, head, body in out if body
    ]


# reStructuredText: a heading is a line underlined (and maybe overlined) by one
# punctuation character repeated; roles, literals and links keep their text.
_UNDERLINE = re.compile(r"([=\-^~\"*+#])\1{2,}")
_PEP = re.compile(r":pep:`(\d+)`")
_ROLE = re.compile(r":[\w:.-]+:`[~!]?([^`<]*?)(?:\s*<[^`>]*>)?`")  # a title, or the target
_LINK = re.compile(r"`([^`<]*?)\s*<[^`>]*>`__?")
_LITERAL = re.compile(r"``([^`]*)``")
_DIRECTIVE = re.compile(r"^\s*\.\. [\w:-]+::|^\s*:\w[\w-]*:(\s|$)|^\s*\.\. _[^:]*:")


def rst_text(text: str) -> str:
    """reStructuredText as the reader sees it: roles, links and literals reduced to
    their text (after the lines are joined: one may wrap)."""
    text = _ROLE.sub(r"\1", _PEP.sub(r"PEP \1", text))
    return _LITERAL.sub(r"\1", _LINK.sub(r"\1", text))


def rst_sections(name: str, text: str) -> list[tuple[str, str, str]]:
    """A reStructuredText page's sections in order: id (``name.N``), heading, body.
    Directives and option lines are dropped; what they hold (code) is kept."""
    lines = text.splitlines()
    out: list[tuple[str, str, list[str]]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        below = lines[i + 1] if i + 1 < len(lines) else ""
        is_rule = _UNDERLINE.fullmatch(line.rstrip()) is not None
        if (
            line.strip()
            and not is_rule
            and _UNDERLINE.fullmatch(below.rstrip())
            and len(below.rstrip()) >= len(line.rstrip())
        ):
            out.append((f"{name}.{len(out) + 1}", rst_text(line.strip()), []))
            i += 2
            continue
        if out and not is_rule and line.strip() and not _DIRECTIVE.match(line):
            out[-1][2].append(line.strip())
        i += 1
    return [(sid, head, rst_text(" ".join(body))) for sid, head, body in out if body]


def _utf8(page: Path) -> str:
    try:
        return page.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SystemExit(f"{page}: not UTF-8 ({exc.reason} at byte {exc.start})") from None


def python_sections(folder: Path) -> list[tuple[str, str, str]]:
    """Every section of Python's FAQ pages (``index`` left out), page by page."""
    pages = sorted(p for p in folder.glob("*.rst.txt") if p.name != "index.rst.txt")
    found: list[tuple[str, str, str]] = []
    for page in pages:
        found.extend(rst_sections(page.name.split(".")[0], _utf8(page)))
    return found


_ZSH_HEADING = re.compile(r"^(\d+)\.(\d+): (.*)$", re.DOTALL)


def zsh_sections(folder: Path) -> list[tuple[str, str, str]]:
    """Zsh's FAQ sections (``N.M: heading``, then paragraphs up to the next heading or
    chapter), read from its chapters' HTML as ``ragsift ingest`` reads a page."""
    from ragsift.ingest.html_text import decode_html, html_text

    found: list[tuple[str, str, list[str]]] = []
    for page in sorted(folder.glob("FAQ0[1-9].html")):
        for paragraph in html_text(decode_html(page.read_bytes())).text.split("\n\n"):
            m = _ZSH_HEADING.match(paragraph)
            if m:
                found.append((f"{m[1]}.{m[2]}", " ".join(m[3].split()), []))
            elif paragraph.startswith("Chapter "):
                found.append(("", "", []))  # a chapter's preface belongs to no section
            elif found:
                found[-1][2].append(paragraph)
    return [
        (sid, head, " ".join(" ".join(body).split())) for sid, head, body in found if sid and body
    ]


# POD: a formatting code keeps its text (``C<< a <=> b >>`` as well), a link its
# text or else its target, an index entry (``X<>``) nothing.
_POD_WIDE = [re.compile(rf"([A-Z]){'<' * n}\s(.*?)\s{'>' * n}", re.DOTALL) for n in (4, 3, 2)]
_POD_CODE = re.compile(r"([A-Z])<([^<>]*)>")
_POD_ESCAPES = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/"}


def _pod_code(m: re.Match[str]) -> str:
    code, inner = m[1], m[2]
    if code in "XZ":
        return ""
    if code == "E":
        return _POD_ESCAPES.get(inner, chr(int(inner)) if inner.isdigit() else "")
    if code == "L":
        return inner.split("|", 1)[0] if "|" in inner else inner.split("/")[-1].strip('"')
    return inner


def pod_text(text: str) -> str:
    """A POD paragraph as its reader sees it: formatting codes reduced to their text."""
    for wide in _POD_WIDE:
        text = wide.sub(_pod_code, text)
    for _ in range(8):  # codes nest: C<I<x>> reduces from the inside out
        reduced = _POD_CODE.sub(_pod_code, text)
        if reduced == text:
            break
        text = reduced
    return text


def perl_sections(folder: Path) -> list[tuple[str, str, str]]:
    """perlfaq1–9's ``=head2`` sections in order (``perlfaq4.12``), their ``=head3``
    subsections and lists joined, read from the POD perl-doc ships."""
    found: list[tuple[str, str, list[str]]] = []
    for page in sorted(folder.glob("perlfaq[1-9].pod")):
        n = 0
        in_section = False
        for block in re.split(r"\n\s*\n", _utf8(page)):
            if block.startswith("=head2 "):
                n += 1
                head = " ".join(pod_text(block[7:]).split())
                found.append((f"{page.stem}.{n}", head, []))
                in_section = True
            elif block.startswith("=head1 "):
                in_section = False
            elif in_section and block.startswith(("=head3 ", "=head4 ", "=item ")):
                found[-1][2].append(pod_text(block.split(None, 1)[1]) if " " in block else "")
            elif in_section and not block.startswith("="):
                found[-1][2].append(pod_text(block))
    return [(sid, head, " ".join(" ".join(body).split())) for sid, head, body in found if body]


def read_faq(faq: str) -> list[tuple[str, str, str]]:
    """The chosen FAQ's sections; a clear exit when its package is not installed."""
    if faq == "perl":
        if not any(PERL_FAQ.glob("perlfaq[1-9].pod")):
            raise SystemExit(
                f"no perlfaq at {PERL_FAQ} (apt-get install perl-doc, or RAGSIFT_PERL_FAQ)"
            )
        return perl_sections(PERL_FAQ)
    if faq == "zsh":
        if not any(ZSH_FAQ.glob("FAQ0[1-9].html")):
            raise SystemExit(
                f"no zsh FAQ at {ZSH_FAQ} (apt-get install zsh-doc, or RAGSIFT_ZSH_FAQ)"
            )
        return zsh_sections(ZSH_FAQ)
    if faq == "python":
        if not any(PYTHON_FAQ.glob("*.rst.txt")):
            raise SystemExit(
                f"no Python FAQ at {PYTHON_FAQ} (apt-get install python3-doc,"
                " or RAGSIFT_PYTHON_FAQ)"
            )
        return python_sections(PYTHON_FAQ)
    if not FAQ.is_file():
        raise SystemExit(
            f"no Debian FAQ at {FAQ} (apt-get install debian-faq, or RAGSIFT_DEBIAN_FAQ)"
        )
    return sections(gzip.decompress(FAQ.read_bytes()).decode("utf-8"))


def zsh_manual(folder: Path) -> list[tuple[str, str]]:
    """The zsh manual's pages beside its FAQ (every page but the FAQ's and redirects),
    as ``ragsift ingest`` reads them: ``man-<page>`` and the page's text."""
    from ragsift.ingest.html_text import decode_html, html_text

    pages = []
    for page in sorted(folder.glob("*.html")):
        if "FAQ" in page.name:
            continue
        text, _, redirect = html_text(decode_html(page.read_bytes()))
        if text and not redirect:
            pages.append((f"man-{page.stem}", text))
    return pages


def main(
    target: Path, holes: float, out_of_scope: int, faq: str = "debian", manual: bool = False
) -> None:
    if not 0.0 <= holes < 1.0:
        raise SystemExit(f"--holes must be in [0, 1), got {holes}")
    if manual and faq != "zsh":
        raise SystemExit("--manual is zsh's: --faq zsh")
    found = read_faq(faq)
    asked = [i for i, (_, head, _) in enumerate(found) if "?" in head]
    rng = random.Random(0)
    # never the first section: a left-out question is judged against the one before it
    left_out = set(rng.sample([i for i in asked if i > 0], round(holes * len(asked))))
    kept = [i for i in range(len(found)) if i not in left_out]
    rows = []
    for i in asked:
        sid, head, _ = found[i]
        if i in left_out:
            before = max(j for j in kept if j < i)
            rows.append((f"q-{sid}", head, f"faq-{found[before][0]}", 0))
        else:
            rows.append((f"q-{sid}", head, f"faq-{sid}", 1))
    squad = json.loads((SQUAD / "test-v2.0.json").read_text(encoding="utf-8"))
    pool = [
        qa["question"]
        for article in squad["data"]
        for para in article["paragraphs"]
        for qa in para["qas"]
    ]
    chosen = random.Random(1).sample(pool, min(out_of_scope, len(pool)))
    pages = zsh_manual(ZSH_FAQ) if manual else []
    corpus = [(f"faq-{found[i][0]}", found[i][2]) for i in kept] + pages
    write_folder(target, corpus, rows, chosen)
    print(
        f"{target}: {len(kept)} sections, {len(pages)} manual pages,"
        f" {len(asked) - len(left_out)} in scope,"
        f" {len(left_out)} near misses (sections left out), {len(chosen)} out of scope"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path)
    parser.add_argument("--holes", type=float, default=0.0, help="share of sections left out")
    parser.add_argument("--out-of-scope", type=int, default=300, help="SQuAD test questions")
    parser.add_argument(
        "--faq",
        choices=("debian", "python", "zsh", "perl"),
        default="debian",
        help="which FAQ (default debian)",
    )
    parser.add_argument(
        "--manual",
        action="store_true",
        help="zsh: the manual's pages join the corpus (the FAQ's answers among ~40 pages)",
    )
    args = parser.parse_args()
    main(args.target, args.holes, args.out_of_scope, args.faq, args.manual)
