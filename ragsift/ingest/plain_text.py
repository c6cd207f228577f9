"""A plain text or Markdown file's bytes as text, or why they are no text.

- UTF-8, with a byte order mark or without: as it is.
- UTF-16 and UTF-32 with their byte order mark (what Windows' editors save as
  "Unicode"): decoded by it. Read as UTF-8 they were a NUL between every letter.
  More than :data:`MAX_REPLACED_SHARE` of the characters undecodable after the mark
  (lone surrogates) is no text: random bytes behind a mark were indexed as chunks of
  CJK-looking noise.
- A file that is not UTF-8 because it was saved in a legacy single-byte encoding
  (most of its non-ASCII bytes are no UTF-8 sequence): read as Windows-1252, which
  covers Latin-1's letters, so "café" is not indexed as "caf\ufffd". A UTF-8 file
  with a few damaged bytes keeps its UTF-8, the damage as U+FFFD.
- Bytes that are no text are refused as :data:`NOT_TEXT`: a NUL byte in the first
  :data:`SNIFF_BYTES` (as git and grep tell binary files from text), or more than
  :data:`MAX_CONTROL_SHARE` control characters. A ``.txt`` holding random or
  compressed bytes was indexed as thousands of chunks of noise.
"""

from __future__ import annotations

import codecs
import re
from typing import Final

from ragsift.ingest.file_text import UnreadableFile

__all__ = [
    "MAX_CONTROL_SHARE",
    "MAX_REPLACED_SHARE",
    "NOT_TEXT",
    "SNIFF_BYTES",
    "has_visible_text",
    "plain_text",
]

#: The skipped-file reason for bytes that are no text.
NOT_TEXT: Final = "not text"
#: Bytes searched for a NUL, as git does.
SNIFF_BYTES: Final = 8000
#: Control characters (not tab, line or page ends, nor ESC) a text may hold, as a share of it.
MAX_CONTROL_SHARE: Final = 0.01
#: Characters a file with a UTF-16 or UTF-32 mark may fail to decode, as a share of them.
MAX_REPLACED_SHARE: Final = 0.01
#: Of a non-UTF-8 file's non-ASCII bytes, the share that must fail as UTF-8 for it to be
#: read as Windows-1252 (a single-byte encoding fails on nearly every one).
LEGACY_SHARE: Final = 0.5

# UTF-32's little-endian mark starts with UTF-16's: test the longer marks first.
_MARKS: Final = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# Not ESC: a log with colour codes is text, at two ESCs a line.
_CONTROL: Final = re.compile(r"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")
_HIGH_BYTES: Final = bytes(range(0x80, 0x100))


def plain_text(data: bytes) -> str:
    """``data`` as text (see the module doc).

    Raises:
        UnreadableFile: the bytes are no text (:data:`NOT_TEXT`).
    """
    for mark, codec in _MARKS:
        if data.startswith(mark):
            text = data.decode(codec, errors="replace")
            replaced = text.count("\ufffd") - data.decode(codec, errors="ignore").count("\ufffd")
            if replaced > MAX_REPLACED_SHARE * max(len(text), 1):
                raise UnreadableFile(
                    NOT_TEXT,
                    f"{replaced:,} of {len(text):,} characters are no {codec.upper()}"
                    " after its byte order mark (binary data?)",
                )
            return _checked(text)
    if b"\x00" in data[:SNIFF_BYTES]:
        raise UnreadableFile(
            NOT_TEXT,
            f"a NUL byte in its first {SNIFF_BYTES:,} bytes"
            " (UTF-16 text needs its byte order mark)",
        )
    try:
        return _checked(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        pass
    lenient = data.decode("utf-8-sig", errors="replace")
    high = len(data) - len(data.translate(None, _HIGH_BYTES))
    if lenient.count("\ufffd") > LEGACY_SHARE * high:
        return _checked(data.decode("cp1252", errors="replace"))
    return _checked(lenient)


def _checked(text: str) -> str:
    controls = len(_CONTROL.findall(text))
    if controls > MAX_CONTROL_SHARE * len(text):
        raise UnreadableFile(
            NOT_TEXT, f"{controls:,} control characters in {len(text):,} (binary data?)"
        )
    return text


def has_visible_text(text: str) -> bool:
    """Whether ``text`` holds anything but white space and control characters: a JSONL
    line of ``"\\u0001\\u0002"`` was indexed as a document, where a ``.txt`` of those
    bytes is passed over."""
    return bool(_CONTROL.sub("", text).strip())
