"""Vector figures (issue 15, item 6): ingestion chunks per second and search latency over
10,000 chunks, on the local setup `make run` uses.

The local S3 Vectors peer (functions/local/vector_peer.py) runs in a process of its own, as S3
Vectors would be; this process runs what a function would: the offline embedder and the S3
Vectors index adapter (agents_core.vectors) with a boto3 client, over HTTP. Chunks are ~800
tokens (OpenAI's default static chunk: ~3,200 characters) of text drawn from a Zipf-weighted
vocabulary, each with the metadata the files API stores (file id, filename, text, index,
attributes).

Figures printed:
- the embedder alone: chunks per second;
- ingestion: embed + PutVectors through the adapter, in batches of 100 chunks;
- search: one query = embed the question + QueryVectors (top 10, metadata returned) over the
  10,000 chunks, median and p95, without and with an attribute filter; the goal is a median
  <= 100 ms.

    .venv/bin/python bench/vectors.py [--chunks 10000] [--queries 200] [--dimension 256]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "layers" / "agents_core"))

BATCH = 100
TENANT, STORE = "bench-tenant", "vs_bench"


def corpus(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = [
        "".join(rng.choice(letters) for _ in range(rng.randint(2, 10))) for _ in range(20_000)
    ]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]  # Zipf
    cumulative = []
    total = 0.0
    for w in weights:
        total += w
        cumulative.append(total)
    return [
        " ".join(rng.choices(vocabulary, cum_weights=cumulative, k=600))[:3200]
        for _ in range(count)
    ]


def start_peer() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "functions" / "local" / "vector_peer.py")],
        stdout=subprocess.PIPE,
        text=True,
    )
    return proc, proc.stdout.readline().strip()


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dimension", type=int, default=256)
    args = parser.parse_args()

    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    import boto3
    from agents_core.vectors import VectorRecord
    from agents_core.vectors.offline import OfflineEmbedder
    from agents_core.vectors.s3vectors import S3VectorIndex

    texts = corpus(args.chunks)
    embedder = OfflineEmbedder(args.dimension)

    sample = texts[:1000]
    fresh = OfflineEmbedder(args.dimension)  # no word cache yet: the cold rate
    started = time.perf_counter()
    fresh.embed(sample)
    embed_rate = len(sample) / (time.perf_counter() - started)

    proc, url = start_peer()
    try:
        index = S3VectorIndex(boto3.client("s3vectors", endpoint_url=url), "bench-vectors")
        index.ensure_bucket()
        index.ensure(TENANT, STORE, embedder.dimension)
        started = time.perf_counter()
        for start in range(0, len(texts), BATCH):
            batch = texts[start : start + BATCH]
            vectors = embedder.embed(batch)
            index.put(
                TENANT,
                STORE,
                [
                    VectorRecord(
                        f"file-{n // 50}#{n % 50:06d}",
                        vector,
                        {
                            "file_id": f"file-{n // 50}",
                            "filename": f"doc-{n // 50}.txt",
                            "text": text,
                            "chunk_index": n % 50,
                            "attributes": {"group": n % 10, "lang": "en" if n % 2 else "fr"},
                        },
                    )
                    for n, (text, vector) in enumerate(zip(batch, vectors, strict=True), start)
                ],
            )
        ingest_seconds = time.perf_counter() - started

        rng = random.Random(3)
        questions = [
            " ".join(rng.sample(texts[rng.randrange(len(texts))].split(), 8))
            for _ in range(args.queries)
        ]
        index.query(
            TENANT, STORE, embedder.embed([questions[0]])[0], 10
        )  # first: builds the matrix
        results = {}
        for label, filters in (
            ("no filter", None),
            (
                "filter group == 3 and lang == en",
                {
                    "type": "and",
                    "filters": [
                        {"type": "eq", "key": "group", "value": 3},
                        {"type": "eq", "key": "lang", "value": "en"},
                    ],
                },
            ),
        ):
            total, query_only = [], []
            for question in questions:
                t0 = time.perf_counter()
                vector = embedder.embed([question])[0]
                t1 = time.perf_counter()
                matches = index.query(TENANT, STORE, vector, 10, filters)
                t2 = time.perf_counter()
                assert matches, "a query found nothing"
                total.append((t2 - t0) * 1000)
                query_only.append((t2 - t1) * 1000)
            results[label] = (total, query_only)
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    numpy = "numpy" if _has_numpy() else "pure Python"
    print(
        f"vectors: {args.chunks} chunks of ~3,200 characters, {args.dimension} dimensions, offline embedder, local S3 Vectors peer ({numpy} brute force)"
    )
    print(f"  embedder alone (cold word cache, 1,000 chunks): {embed_rate:,.0f} chunks/s")
    print(
        f"  ingestion, embed + PutVectors in batches of {BATCH}: {args.chunks / ingest_seconds:,.0f} chunks/s ({ingest_seconds:.1f} s for {args.chunks})"
    )
    for label, (total, query_only) in results.items():
        median = statistics.median(total)
        print(
            f"  search ({label}), {args.queries} queries, top 10 with metadata: median {median:.1f} ms,"
            f" p95 {percentile(total, 0.95):.1f} ms (QueryVectors alone: median {statistics.median(query_only):.1f} ms)"
            f"; goal <= 100 ms median: {'ok' if median <= 100 else 'OVER GOAL'}"
        )


def _has_numpy() -> bool:
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()
