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


#: Words whose bucket contributions are remembered (text repeats its words: Zipf).
_CACHE_WORDS = 50_000


class OfflineEmbedder:
    def __init__(self, dimension: int = 256, model: str = "offline-lexical") -> None:
        if not 1 <= dimension <= 4096:
            raise ValueError(f"an embedding dimension is 1 to 4096, not {dimension}")
        self.model = model
        self.dimension = dimension
        self._words: dict[str, tuple[tuple[int, float], ...]] = {}

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> list[float]:
        buckets = [0.0] * self.dimension
        for word in _WORD.findall(text.lower()):
            for bucket, weight in self._features(word):
                buckets[bucket] += weight
        norm = math.sqrt(sum(v * v for v in buckets))
        if norm == 0.0:  # no words at all: a fixed unit vector, so cosine stays defined
            buckets[0] = norm = 1.0
        return [v / norm for v in buckets]

    def _features(self, word: str) -> tuple[tuple[int, float], ...]:
        """(bucket, signed weight) of the word and of its trigrams."""
        found = self._words.get(word)
        if found is None:
            padded = f"<{word}>"
            features = [(word, 1.0)] + [
                ("#" + padded[i : i + 3], 0.5) for i in range(len(padded) - 2)
            ]
            found = tuple(self._signed(feature, weight) for feature, weight in features)
            if len(self._words) >= _CACHE_WORDS:
                self._words.clear()
            self._words[word] = found
        return found

    def _signed(self, feature: str, weight: float) -> tuple[int, float]:
        # crc32: stable across processes (str hash is salted per process) and fast.
        h = zlib.crc32(feature.encode())
        return h % self.dimension, weight if (h >> 31) & 1 else -weight
