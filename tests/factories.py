"""Settings shared by tests in several tiers."""

from __future__ import annotations

import importlib.util
import io
import sys
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from ragsift.confidence import CalibrationArtifact
from ragsift.confidence.artifact import ConformalSpec, DataSummary
from ragsift.ingest.loaders import SourceDocument
from ragsift.retrieval.records import SearchHit
from ragsift.settings import ConfidenceSettings, EmbedderSettings, LimitSettings, Settings

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(name: str) -> ModuleType:
    """``scripts/NAME.py`` imported as a module (the scripts folder is not a package).

    Registered in ``sys.modules`` first, as an import would: dataclasses and
    pickling look their module up there.
    """
    if str(SCRIPTS) not in sys.path:  # a script imports its siblings, as run from there
        sys.path.append(str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def low_bar_confidence() -> ConfidenceSettings:
    """Bars low enough that the hashing embedder's small cosines keep hits.

    For tests of plumbing and isolation, not of the calibrated confidence.
    """
    return ConfidenceSettings(
        scorer="weighted",
        similarity_threshold=0.05,
        high_threshold=0.30,
        medium_threshold=0.20,
        low_threshold=0.10,
    )


#: the embedded tests' query limit: low, so a hostile long query is cheap to build
EMBEDDED_MAX_QUERY_CHARS = 500


def embedded_settings(data_dir: Path, **confidence: Any) -> Settings:
    """Embedded-runtime settings for plumbing tests: hashing embedder, low bars.

    The weighted scorer with low bars keeps these tests independent of the fitted
    calibration (tested on its own): the hashing embedder's cosines are small, and
    the plumbing is what is checked. Hashing is pinned (not the default onnx) for
    that reason and for speed. ``confidence`` overrides ConfidenceSettings fields.
    """
    return Settings(
        data_dir=data_dir,
        confidence=ConfidenceSettings(**{**low_bar_confidence().model_dump(), **confidence}),
        limits=LimitSettings(max_query_chars=EMBEDDED_MAX_QUERY_CHARS),
        embedder=EmbedderSettings(kind="hashing"),
    )


def write_corpus(folder: Path, docs: Iterable[SourceDocument]) -> Path:
    """``docs`` as one Markdown file each in ``folder`` (created), for `ragsift ingest`."""
    folder.mkdir(parents=True, exist_ok=True)
    for doc in docs:
        (folder / f"{doc.doc_id}.md").write_text(doc.text, encoding="utf-8")
    return folder


def made_on_base(
    artifact: CalibrationArtifact, base_version: str, **provenance: Any
) -> CalibrationArtifact:
    """``artifact`` (a probe calibration) as if made on the shipped calibration
    ``base_version`` (and with other ``provenance`` fields): what an upgrade that
    refits the shipped one leaves in a store."""
    assert artifact.provenance is not None
    older = artifact.provenance.model_copy(update={"base_version": base_version, **provenance})
    return CalibrationArtifact.model_validate(
        artifact.model_dump() | {"version": "", "provenance": older.model_dump()}
    )


def top_score_artifact(conformal: ConformalSpec) -> CalibrationArtifact:
    """A calibration on ``top_score`` alone (coefficient 1, intercept 0) with this
    certificate: for tests of what the certificate carries."""
    return CalibrationArtifact(
        embedder_id="e",
        metric="cosine",
        features=("top_score",),
        coefficients=(1.0,),
        intercept=0.0,
        conformal=conformal,
        data=DataSummary(source="test", n_examples=conformal.n_calibration),
    )


def search_hit(
    rank: int, dense: float | None, sparse: float | None, text: str = "text"
) -> SearchHit:
    """A hybrid hit at ``rank`` with these channel scores (RRF from the rank)."""
    return SearchHit(
        chunk_id=f"c{rank}",
        doc_id=f"d{rank}",
        tenant_id="t",
        text=text,
        source="s",
        source_type="doc",
        score=1.0 / rank,
        rank=rank,
        dense_score=dense,
        sparse_score=sparse,
        fused_score=1.0 / rank,
    )


def make_pdf(pages: list[list[str]], *, title: str | None = None) -> bytes:
    """A minimal PDF: each page's lines in Helvetica, one under the other."""

    def literal(text: str) -> str:
        return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"

    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    kids = []
    for lines in pages:
        stream = (
            "BT /F1 12 Tf 14 TL 72 720 Td "
            + " ".join(f"{literal(line)} Tj T*" for line in lines)
            + " ET"
        )
        objects.append(
            f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream".encode("latin-1")
        )
        content = len(objects)
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content} 0 R"
            " /Resources << /Font << /F1 3 0 R >> >> >>".encode()
        )
        kids.append(len(objects))
    refs = " ".join(f"{k} 0 R" for k in kids)
    objects[1] = f"<< /Type /Pages /Kids [{refs}] /Count {len(kids)} >>".encode()
    if title is not None:
        objects.append(f"<< /Title {literal(title)} >>".encode("latin-1"))
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    out.write("".join(f"{offset:010d} 00000 n \n" for offset in offsets).encode())
    info = f" /Info {len(objects)} 0 R" if title is not None else ""
    trailer = f"<< /Size {len(objects) + 1} /Root 1 0 R{info} >>"
    out.write(f"trailer\n{trailer}\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


#: WordprocessingML's namespace.
W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def make_docx(
    body: str, *, title: str | None = None, extra: dict[str, bytes] | None = None
) -> bytes:
    """A minimal .docx: ``body`` is the XML inside ``w:body``."""
    parts: dict[str, str | bytes] = {
        "[Content_Types].xml": "<Types/>",
        "word/document.xml": f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{W}">'
        f"<w:body>{body}</w:body></w:document>",
    }
    if title is not None:
        parts["docProps/core.xml"] = (
            '<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/'
            'metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/">'
            f"<dc:title>{title}</dc:title></cp:coreProperties>"
        )
    return zipped({**parts, **(extra or {})})


def zipped(parts: Mapping[str, str | bytes]) -> bytes:
    """A deflated zip of ``parts`` (name to content), written in their order."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as package:
        for name, data in parts.items():
            package.writestr(name, data)
    return out.getvalue()


def docx_paragraph(*runs: str) -> str:
    """A ``w:p`` of these runs' XML."""
    return "<w:p>" + "".join(f"<w:r>{run}</w:r>" for run in runs) + "</w:p>"


def make_odt(body: str, *, title: str | None = None) -> bytes:
    """A minimal .odt: ``body`` is the XML inside ``office:text``."""
    ns = (
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"'
        ' xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"'
        ' xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"'
    )
    parts: dict[str, str | bytes] = {
        "mimetype": "application/vnd.oasis.opendocument.text",
        "content.xml": f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {ns}>'
        f"<office:body><office:text>{body}</office:text></office:body>"
        "</office:document-content>",
    }
    if title is not None:
        parts["meta.xml"] = (
            '<office:document-meta xmlns:office="urn:oasis:names:tc:opendocument:xmlns:'
            'office:1.0" xmlns:dc="http://purl.org/dc/elements/1.1/"><office:meta>'
            f"<dc:title>{title}</dc:title></office:meta></office:document-meta>"
        )
    return zipped(parts)


def make_epub(
    pages: dict[str, str],
    spine: list[str],
    *,
    title: str | None = None,
    extra: dict[str, bytes] | None = None,
    nav: str | None = None,
) -> bytes:
    """A minimal EPUB whose package document is ``OEBPS/book.opf``: ``pages`` maps each
    XHTML file (relative to OEBPS, as its manifest href) to its body's markup, in the
    order ``spine`` gives; ``nav``, where given, is a navigation document's file, listed
    first in the spine as EPUB 3 allows."""
    items = "".join(
        f'<item id="p{i}" href="{href}" media-type="application/xhtml+xml"'
        f"{' properties=' + chr(34) + 'nav' + chr(34) if href == nav else ''}/>"
        for i, href in enumerate(pages)
    )
    ids = {href: f"p{i}" for i, href in enumerate(pages)}
    refs = "".join(f'<itemref idref="{ids[href]}"/>' for href in spine)
    meta = f"<dc:title>{title}</dc:title>" if title is not None else ""
    opf = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
        f'<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">{meta}</metadata>'
        f'<manifest>{items}<item id="css" href="style.css" media-type="text/css"/></manifest>'
        f'<spine>{refs}<itemref idref="css"/></spine></package>'
    )
    parts: dict[str, str | bytes] = {
        "mimetype": "application/epub+zip",
        "META-INF/container.xml": '<?xml version="1.0"?><container version="1.0"'
        ' xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
        '<rootfile full-path="OEBPS/book.opf" media-type="application/oebps-package+xml"/>'
        "</rootfiles></container>",
        "OEBPS/book.opf": opf,
    }
    for href, body in pages.items():
        parts["OEBPS/" + href.replace("%20", " ")] = (
            '<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml">'
            f"<head><title>{href}</title></head><body>{body}</body></html>"
        )
    return zipped({**parts, **(extra or {})})
