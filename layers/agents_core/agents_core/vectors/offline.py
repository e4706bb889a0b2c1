"""The offline embedder: lexical, not semantic. Deterministic vectors with no model and no
network, for `make run` and tests.

Each text becomes a hashed bag of features (its lowercased words, and the character trigrams of
each word at half weight) folded into `dimension` buckets with a hash-chosen sign, then scaled
to unit length. Texts sharing words (or word pieces: "embedding", "embeddings") score high;
synonyms and paraphrases with no shared words score near zero, as they would not with a real
embedding model.
"""

from __future__ import annotations

import math
import re
import zlib

_WORD = re.compile(r"\w+", re.UNICODE)


class OfflineEmbedder:
    def __init__(self, dimension: int = 256, model: str = "offline-lexical") -> None:
        if not 1 <= dimension <= 4096:
            raise ValueError(f"an embedding dimension is 1 to 4096, not {dimension}")
        self.model = model
        self.dimension = dimension

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> list[float]:
        buckets = [0.0] * self.dimension
        for word in _WORD.findall(text.lower()):
            _add(buckets, word, 1.0)
            padded = f"<{word}>"
            for start in range(len(padded) - 2):
                _add(buckets, "#" + padded[start : start + 3], 0.5)
        norm = math.sqrt(sum(v * v for v in buckets))
        if norm == 0.0:  # no words at all: a fixed unit vector, so cosine stays defined
            buckets[0] = norm = 1.0
        return [v / norm for v in buckets]


def _add(buckets: list[float], feature: str, weight: float) -> None:
    # crc32: stable across processes (str hash is salted per process) and fast.
    h = zlib.crc32(feature.encode())
    buckets[h % len(buckets)] += weight if (h >> 31) & 1 else -weight
