"""A local Amazon S3 Vectors: the REST protocol botocore's `s3vectors` client speaks (POST
/<Operation> with a JSON body), over HTTP on 127.0.0.1, for `make run`, tests and benchmarks.

moto serves vector buckets, indexes and vector reads and writes but not QueryVectors; this
serves the operations agents_core.vectors uses, QueryVectors included (exact brute-force
cosine or euclidean distance, the metadata filter applied during the search as S3 Vectors
does), so the adapter that runs in Lambda runs unchanged here. Data lives in memory.

    url, stop = start_vector_peer()      # in-process, a daemon thread
    python functions/local/vector_peer.py   # a process of its own; prints its URL
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# One query is one matrix-vector product: BLAS threads only contend for the cores (a product
# over 10,000 x 256 takes ~0.6 ms on one thread, ~5 ms spread over two busy ones).
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

try:  # present with the dev dependencies; the pure Python path below serves without it
    import numpy
except ImportError:  # pragma: no cover
    numpy = None

_ARN = "arn:aws:s3vectors:us-east-1:000000000000"
MAX_TOP_K = 100
MAX_BATCH = 500


class PeerError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _not_found(what: str) -> PeerError:
    return PeerError(404, "NotFoundException", f"{what} not found")


def _invalid(message: str) -> PeerError:
    return PeerError(400, "ValidationException", message)


class Index:
    def __init__(self, bucket: str, name: str, spec: dict[str, Any]) -> None:
        self.bucket, self.name = bucket, name
        self.dimension = int(spec["dimension"])
        self.metric = spec.get("distanceMetric", "cosine")
        config = spec.get("metadataConfiguration") or {}
        self.non_filterable = set(config.get("nonFilterableMetadataKeys") or [])
        self.created = time.time()
        self.vectors: dict[str, tuple[list[float], dict[str, Any]]] = {}
        self._matrix: Any = None  # (keys, rows) built at the first query after a change

    def describe(self) -> dict[str, Any]:
        return {
            "vectorBucketName": self.bucket,
            "indexName": self.name,
            "indexArn": f"{_ARN}:bucket/{self.bucket}/index/{self.name}",
            "creationTime": self.created,
            "dataType": "float32",
            "dimension": self.dimension,
            "distanceMetric": self.metric,
            "metadataConfiguration": {"nonFilterableMetadataKeys": sorted(self.non_filterable)},
        }

    def put(self, vectors: list[dict[str, Any]]) -> None:
        if not 1 <= len(vectors) <= MAX_BATCH:
            raise _invalid(f"PutVectors takes 1 to {MAX_BATCH} vectors")
        keys = [v.get("key") for v in vectors]
        if len(set(keys)) != len(keys):
            raise _invalid("a PutVectors request repeats a key")
        staged = {}
        for vector in vectors:
            data = (vector.get("data") or {}).get("float32")
            if not isinstance(data, list) or len(data) != self.dimension:
                raise _invalid(f"vector {vector.get('key')!r} is not {self.dimension}-dimension")
            if self.metric == "cosine" and not any(data):
                raise _invalid("a zero vector has no cosine distance")
            staged[vector["key"]] = ([float(x) for x in data], vector.get("metadata") or {})
        self.vectors.update(staged)
        self._matrix = None

    def delete(self, keys: list[str]) -> None:
        for key in keys:
            self.vectors.pop(key, None)
        self._matrix = None

    def query(self, body: dict[str, Any]) -> dict[str, Any]:
        top_k = body.get("topK")
        if not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
            raise _invalid(f"topK is 1 to {MAX_TOP_K}")
        query = (body.get("queryVector") or {}).get("float32")
        if not isinstance(query, list) or len(query) != self.dimension:
            raise _invalid(f"the query vector is not {self.dimension}-dimension")
        condition = body.get("filter")
        if condition is not None:
            _check_filter(condition)
        keys, distances, order = self._ranked([float(x) for x in query])
        hits = []
        for i in order:
            _, metadata = self.vectors[keys[i]]
            if condition is not None and not self._matches(condition, metadata):
                continue
            hit: dict[str, Any] = {"key": keys[i]}
            if body.get("returnDistance"):
                hit["distance"] = float(distances[i])
            if body.get("returnMetadata"):
                hit["metadata"] = metadata
            hits.append(hit)
            if len(hits) == top_k:
                break
        return {"vectors": hits, "distanceMetric": self.metric}

    def _ranked(self, query: list[float]) -> tuple[list[str], list[float], Any]:
        """(keys, their distances, positions from the nearest)."""
        keys, distances = self._distances(query)
        if numpy is not None:
            return keys, distances, numpy.argsort(distances, kind="stable").tolist()
        return keys, distances, sorted(range(len(keys)), key=distances.__getitem__)

    def _distances(self, query: list[float]) -> tuple[list[str], Any]:
        if numpy is not None:
            if self._matrix is None:
                keys = list(self.vectors)
                rows = numpy.array([self.vectors[k][0] for k in keys], dtype=numpy.float32)
                rows = rows.reshape(len(keys), self.dimension)
                if self.metric == "cosine" and len(keys):
                    rows /= numpy.linalg.norm(rows, axis=1, keepdims=True)
                self._matrix = (keys, rows)
            keys, rows = self._matrix
            q = numpy.array(query, dtype=numpy.float32)
            if self.metric == "cosine":
                distances = 1.0 - rows @ (q / (numpy.linalg.norm(q) or 1.0))
            else:
                distances = numpy.linalg.norm(rows - q, axis=1)
            return keys, distances
        keys = list(self.vectors)
        if self.metric == "cosine":
            qn = math.sqrt(sum(x * x for x in query)) or 1.0
            distances = []
            for key in keys:
                v = self.vectors[key][0]
                vn = math.sqrt(sum(x * x for x in v)) or 1.0
                distances.append(1.0 - sum(map(float.__mul__, v, query)) / (vn * qn))
            return keys, distances
        return keys, [math.dist(self.vectors[k][0], query) for k in keys]

    def _matches(self, condition: dict[str, Any], metadata: dict[str, Any]) -> bool:
        filterable = {k: v for k, v in metadata.items() if k not in self.non_filterable}
        return _evaluate(condition, filterable)


_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists")


def _check_filter(condition: Any) -> None:
    if not isinstance(condition, dict) or not condition:
        raise _invalid("a filter is a non-empty object")
    for key, value in condition.items():
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise _invalid(f"{key} takes a non-empty array of filters")
            for part in value:
                _check_filter(part)
        elif key.startswith("$"):
            raise _invalid(f"unknown filter operator {key}")
        elif isinstance(value, dict):
            for op, operand in value.items():
                if op not in _OPERATORS:
                    raise _invalid(f"unknown filter operator {op}")
                if op in ("$gt", "$gte", "$lt", "$lte") and (
                    isinstance(operand, bool) or not isinstance(operand, int | float)
                ):
                    raise _invalid(f"{op} takes a number")
                if op in ("$in", "$nin") and (not isinstance(operand, list) or not operand):
                    raise _invalid(f"{op} takes a non-empty array")


def _evaluate(condition: dict[str, Any], metadata: dict[str, Any]) -> bool:
    for key, value in condition.items():
        if key == "$and":
            ok = all(_evaluate(part, metadata) for part in value)
        elif key == "$or":
            ok = any(_evaluate(part, metadata) for part in value)
        elif isinstance(value, dict):
            ok = all(_compare(op, metadata.get(key), key in metadata, v) for op, v in value.items())
        else:
            ok = _compare("$eq", metadata.get(key), key in metadata, value)
        if not ok:
            return False
    return True


def _same(a: Any, b: Any) -> bool:
    """Equal as S3 Vectors compares: a boolean is not a number."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def _compare(op: str, field: Any, present: bool, operand: Any) -> bool:
    if op == "$exists":
        return present == bool(operand)
    values = field if isinstance(field, list) else [field]  # an array matches by any element
    if op == "$eq":
        return present and any(_same(v, operand) for v in values)
    if op == "$ne":
        return not (present and any(_same(v, operand) for v in values))
    if op == "$in":
        return present and any(_same(v, o) for v in values for o in operand)
    if op == "$nin":
        return not (present and any(_same(v, o) for v in values for o in operand))
    if not present or isinstance(field, bool) or not isinstance(field, int | float):
        return False
    return {
        "$gt": field > operand,
        "$gte": field >= operand,
        "$lt": field < operand,
        "$lte": field <= operand,
    }[op]


class VectorPeer:
    """The state (vector buckets and their indexes) and the operations on it."""

    def __init__(self) -> None:
        self.buckets: dict[str, dict[str, Index]] = {}
        self.lock = threading.Lock()

    def dump(self) -> dict[str, Any]:
        """Every bucket, index and vector as JSON (`make run`'s DATA_DIR keeps it)."""
        with self.lock:
            return {
                bucket: {
                    name: {"spec": index.describe(), "vectors": index.vectors}
                    for name, index in indexes.items()
                }
                for bucket, indexes in self.buckets.items()
            }

    def load(self, state: dict[str, Any]) -> None:
        """The buckets `dump` wrote, in place of this peer's buckets of the same names."""
        buckets: dict[str, dict[str, Index]] = {}
        for bucket, indexes in state.items():
            buckets[bucket] = {}
            for name, kept in indexes.items():
                index = Index(bucket, name, kept["spec"])
                index.vectors = {key: (data, meta) for key, (data, meta) in kept["vectors"].items()}
                buckets[bucket][name] = index
        with self.lock:
            self.buckets.update(buckets)

    def handle(self, operation: str, body: dict[str, Any]) -> dict[str, Any]:
        handler = getattr(self, f"op_{operation}", None)
        if handler is None:
            raise PeerError(400, "ValidationException", f"{operation} is not served here")
        with self.lock:
            return handler(body)

    def _bucket(self, body: dict[str, Any]) -> dict[str, Index]:
        name = body.get("vectorBucketName")
        if name not in self.buckets:
            raise _not_found(f"vector bucket {name}")
        return self.buckets[name]

    def _index(self, body: dict[str, Any]) -> Index:
        indexes = self._bucket(body)
        name = body.get("indexName")
        if name not in indexes:
            raise _not_found(f"index {name}")
        return indexes[name]

    def op_CreateVectorBucket(self, body: dict[str, Any]) -> dict[str, Any]:
        name = body.get("vectorBucketName")
        if name in self.buckets:
            raise PeerError(409, "ConflictException", f"vector bucket {name} exists")
        self.buckets[name] = {}
        return {}

    def op_GetVectorBucket(self, body: dict[str, Any]) -> dict[str, Any]:
        self._bucket(body)
        name = body["vectorBucketName"]
        return {
            "vectorBucket": {
                "vectorBucketName": name,
                "vectorBucketArn": f"{_ARN}:bucket/{name}",
                "creationTime": 0,
            }
        }

    def op_CreateIndex(self, body: dict[str, Any]) -> dict[str, Any]:
        indexes = self._bucket(body)
        name = body.get("indexName")
        if name in indexes:
            raise PeerError(409, "ConflictException", f"index {name} exists")
        if not 1 <= int(body.get("dimension", 0)) <= 4096:
            raise _invalid("dimension is 1 to 4096")
        indexes[name] = Index(body["vectorBucketName"], name, body)
        return {}

    def op_GetIndex(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"index": self._index(body).describe()}

    def op_ListIndexes(self, body: dict[str, Any]) -> dict[str, Any]:
        prefix = body.get("prefix") or ""
        return {
            "indexes": [
                {k: i.describe()[k] for k in ("vectorBucketName", "indexName", "creationTime")}
                for name, i in sorted(self._bucket(body).items())
                if name.startswith(prefix)
            ]
        }

    def op_DeleteIndex(self, body: dict[str, Any]) -> dict[str, Any]:
        self._index(body)
        del self.buckets[body["vectorBucketName"]][body["indexName"]]
        return {}

    def op_PutVectors(self, body: dict[str, Any]) -> dict[str, Any]:
        self._index(body).put(body.get("vectors") or [])
        return {}

    def op_DeleteVectors(self, body: dict[str, Any]) -> dict[str, Any]:
        keys = body.get("keys") or []
        if not 1 <= len(keys) <= MAX_BATCH:
            raise _invalid(f"DeleteVectors takes 1 to {MAX_BATCH} keys")
        self._index(body).delete(keys)
        return {}

    def op_GetVectors(self, body: dict[str, Any]) -> dict[str, Any]:
        index = self._index(body)
        found = []
        for key in body.get("keys") or []:
            if key in index.vectors:
                data, metadata = index.vectors[key]
                item: dict[str, Any] = {"key": key}
                if body.get("returnData"):
                    item["data"] = {"float32": data}
                if body.get("returnMetadata"):
                    item["metadata"] = metadata
                found.append(item)
        return {"vectors": found}

    def op_ListVectors(self, body: dict[str, Any]) -> dict[str, Any]:
        index = self._index(body)
        keys = sorted(index.vectors)
        start = int(body.get("nextToken") or 0)
        size = int(body.get("maxResults") or 500)
        page = keys[start : start + size]
        answer: dict[str, Any] = {"vectors": [{"key": k} for k in page]}
        if start + size < len(keys):
            answer["nextToken"] = str(start + size)
        return answer

    def op_QueryVectors(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._index(body).query(body)


def _handler(peer: VectorPeer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: with Nagle's algorithm on, the body waits for
        # the client's delayed ACK (some 40 ms a request).
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
                answer = peer.handle(self.path.strip("/").split("?")[0], body)
                self._send(200, answer)
            except PeerError as err:
                self._send(err.status, {"message": err.message}, err.code)
            except (ValueError, TypeError, KeyError) as err:
                self._send(400, {"message": f"malformed request: {err}"}, "ValidationException")

        def _send(self, status: int, answer: dict[str, Any], code: str | None = None) -> None:
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if code:
                self.send_header("x-amzn-ErrorType", code)
            self.end_headers()
            self.wfile.write(data)

    return Handler


def start_vector_peer(port: int = 0, peer: VectorPeer | None = None) -> tuple[str, Any]:
    """(its URL, a function that stops it): `peer` (a new one by default) served from a daemon
    thread of this process."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(peer or VectorPeer()))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return f"http://127.0.0.1:{server.server_port}", stop


if __name__ == "__main__":
    url, _ = start_vector_peer(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(url, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        threading.Event().wait()
