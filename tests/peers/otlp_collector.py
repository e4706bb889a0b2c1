"""An OTLP/HTTP collector as tests need one: `POST /v1/traces` with a JSON
ExportTraceServiceRequest, each span kept; `status` answers every export (500: a collector that
fails)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from .http import LocalPeer


class OtlpCollector(LocalPeer):
    def __init__(self) -> None:
        self.exports: list[dict[str, Any]] = []
        self.status = 200
        self._lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                ok = self.path == "/v1/traces" and self.headers.get("Content-Type") == (
                    "application/json"
                )
                if ok and collector.status == 200:
                    with collector._lock:
                        collector.exports.append(json.loads(body))
                status = collector.status if ok else 404
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)

    def spans(self) -> list[dict[str, Any]]:
        """Every span received, with its resource's attributes under `resource`."""
        with self._lock:
            exports = list(self.exports)
        found = []
        for export in exports:
            for resource_spans in export["resourceSpans"]:
                resource = attributes(resource_spans["resource"])
                for scope in resource_spans["scopeSpans"]:
                    for span in scope["spans"]:
                        found.append({**span, "resource": resource})
        return found


def attributes(holder: dict[str, Any]) -> dict[str, Any]:
    """An OTLP attribute list as a dict of plain values."""
    return {a["key"]: _plain(a["value"]) for a in holder.get("attributes", [])}


def _plain(value: dict[str, Any]) -> Any:
    ((kind, raw),) = value.items()
    if kind == "intValue":
        return int(raw)
    if kind == "arrayValue":
        return [_plain(v) for v in raw.get("values", [])]
    return raw
