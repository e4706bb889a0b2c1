"""Text out of an uploaded file, and that text in chunks, for a vector store.

Types are told by the file name's extension (then by the first bytes: `%PDF-`): plain text,
Markdown, JSON, HTML (tags stripped with the standard library's parser, scripts and styles
dropped), PDF (`pypdf`, imported only for a PDF). Anything else is `Unsupported`.

Tokens are estimated at 4 characters a token (as the context window and `/v1/embeddings` do:
no tokenizer at hand), so a chunk of N tokens is at most 4N characters, cut at the last
whitespace in its second half when there is one.
"""

from __future__ import annotations

import io
import json
from html.parser import HTMLParser

CHARS_PER_TOKEN = 4
#: OpenAI's `auto` chunking strategy.
AUTO_MAX_TOKENS, AUTO_OVERLAP_TOKENS = 800, 400

TEXT_TYPES = {
    ".txt": "text",
    ".text": "text",
    ".md": "text",
    ".markdown": "text",
    ".csv": "text",
    ".log": "text",
    ".rst": "text",
    ".json": "json",
    ".jsonl": "text",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}


class Unsupported(Exception):
    """Not a type this server reads (`unsupported_file`)."""


class Unreadable(Exception):
    """Of a known type but broken or without text (`invalid_file`)."""


def extract_text(filename: str, data: bytes) -> str:
    kind = _kind(filename, data)
    if kind == "pdf":
        return _pdf_text(data)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Unreadable("the file is not UTF-8 text") from None
    if kind == "json":
        try:
            json.loads(text)
        except ValueError as err:
            raise Unreadable(f"the file is not valid JSON: {err}") from None
        return text
    if kind == "html":
        return _html_text(text)
    return text


def _kind(filename: str, data: bytes) -> str:
    if data.startswith(b"%PDF-"):
        return "pdf"
    dot = filename.rfind(".")
    kind = TEXT_TYPES.get(filename[dot:].lower()) if dot >= 0 else None
    if kind is None:
        raise Unsupported(f"files of type {filename[dot:] or '(none)'!r} are not supported")
    return kind


def _pdf_text(data: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        return "\n\n".join((page.extract_text() or "") for page in reader.pages)
    except (PdfReadError, ValueError, KeyError, TypeError) as err:
        raise Unreadable(f"the PDF could not be read: {err}") from None


class _TextOfHtml(HTMLParser):
    SKIP = {"script", "style", "noscript", "template"}
    BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "pre"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag in self.SKIP:
            self.skipping += 1
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP and self.skipping:
            self.skipping -= 1
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append(data)


def _html_text(html: str) -> str:
    parser = _TextOfHtml()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)


def chunk_text(text: str, max_tokens: int, overlap_tokens: int) -> list[str]:
    """Chunks of at most `max_tokens` (estimated), each starting `overlap_tokens` before the
    last one's end; whitespace-only chunks are dropped."""
    size = max_tokens * CHARS_PER_TOKEN
    overlap = min(overlap_tokens, max_tokens // 2) * CHARS_PER_TOKEN
    text = text.strip()
    chunks: list[str] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            cut = text.rfind(" ", start + size // 2, end)
            cut = max(cut, text.rfind("\n", start + size // 2, end))
            if cut > start:
                end = cut
        piece = text[start:end].strip()
        if piece:
            chunks.append(piece)
        if end >= len(text):
            break
        start = max(end - overlap, start + 1)
    return chunks
