"""An Amazon Bedrock Guardrails emulator for ApplyGuardrail: real HTTP on 127.0.0.1 speaking
bedrock-runtime's REST-JSON protocol (`POST /guardrail/{id}/version/{v}/apply`), so a boto3
client given its URL as `endpoint_url` (or `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`) talks to it as to
AWS. moto has no ApplyGuardrail.

A guardrail blocks text containing one of its words (a custom word list), or one of the words
of a content filter (reported as that filter's type, e.g. VIOLENCE), answering with its blocked
message; unknown guardrails and versions are ResourceNotFoundException.

    with GuardrailEmulator() as bedrock:
        bedrock.guardrail("gr1", version="1", words=["secret"], filters={"VIOLENCE": ["attack"]})
        bedrock.fail("ThrottlingException")  # the next request answers that error
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote

from .http import LocalPeer

#: Error code -> HTTP status, as bedrock-runtime answers them.
_STATUS = {
    "ThrottlingException": 429,
    "ResourceNotFoundException": 404,
    "ValidationException": 400,
    "AccessDeniedException": 403,
    "InternalServerException": 500,
    "ServiceUnavailableException": 503,
}


@dataclass
class Guardrail:
    version: str = "1"
    words: list[str] = field(default_factory=list)
    filters: dict[str, list[str]] = field(default_factory=dict)  # type -> words
    blocked_message: str = "Sorry, the model cannot answer this question."


class GuardrailEmulator(LocalPeer):
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []  # each body, with guardrail, version and path
        self._guardrails: dict[str, Guardrail] = {}
        self._failures: list[str] = []
        self._lock = threading.Lock()
        emulator = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body leave in separate writes: without this, Nagle's algorithm and the
            # client's delayed ACK add some 40 ms to every answer on loopback.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                parts = self.path.split("/")
                # ['', 'guardrail', '{id}', 'version', '{v}', 'apply']
                if len(parts) != 6 or parts[1] != "guardrail" or parts[5] != "apply":
                    return emulator._error(self, "UnknownOperationException", 404, self.path)
                guardrail_id, version = unquote(parts[2]), unquote(parts[4])
                with emulator._lock:
                    emulator.requests.append(
                        {**body, "guardrail": guardrail_id, "version": version, "path": self.path}
                    )
                    failure = emulator._failures.pop(0) if emulator._failures else None
                if failure:
                    return emulator._error(self, failure, _STATUS.get(failure, 500), "emulated")
                guardrail = emulator._guardrails.get(guardrail_id.rsplit("/", 1)[-1])
                if guardrail is None or guardrail.version != version:
                    message = f"Guardrail {guardrail_id} version {version} not found"
                    return emulator._error(self, "ResourceNotFoundException", 404, message)
                emulator._send(self, 200, emulator._apply(guardrail, body))

        super().__init__(Handler)

    def guardrail(self, guardrail_id: str, **kwargs: Any) -> None:
        self._guardrails[guardrail_id] = Guardrail(**kwargs)

    def fail(self, code: str, times: int = 1) -> None:
        """The next `times` requests answer the error `code` (e.g. ThrottlingException)."""
        with self._lock:
            self._failures += [code] * times

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._failures.clear()

    @staticmethod
    def _apply(guardrail: Guardrail, body: dict[str, Any]) -> dict[str, Any]:
        text = " ".join(block.get("text", {}).get("text", "") for block in body["content"])
        lowered = text.lower()
        words = [
            {"match": w, "action": "BLOCKED", "detected": True}
            for w in guardrail.words
            if w.lower() in lowered
        ]
        filters = [
            {
                "type": kind,
                "confidence": "HIGH",
                "filterStrength": "HIGH",
                "action": "BLOCKED",
                "detected": True,
            }
            for kind, triggers in guardrail.filters.items()
            if any(t.lower() in lowered for t in triggers)
        ]
        assessment: dict[str, Any] = {
            "invocationMetrics": {
                "guardrailProcessingLatency": 1,
                "guardrailCoverage": {"textCharacters": {"guarded": len(text), "total": len(text)}},
            }
        }
        if words:
            assessment["wordPolicy"] = {"customWords": words, "managedWordLists": []}
        if filters:
            assessment["contentPolicy"] = {"filters": filters}
        blocked = bool(words or filters)
        units = {
            name: 1 if name == "contentPolicyUnits" else 0
            for name in (
                "topicPolicyUnits",
                "contentPolicyUnits",
                "wordPolicyUnits",
                "sensitiveInformationPolicyUnits",
                "sensitiveInformationPolicyFreeUnits",
                "contextualGroundingPolicyUnits",
            )
        }
        answer: dict[str, Any] = {
            "usage": units,
            "action": "GUARDRAIL_INTERVENED" if blocked else "NONE",
            "outputs": [{"text": guardrail.blocked_message}] if blocked else [],
            "assessments": [assessment],
        }
        if blocked:
            answer["actionReason"] = "Guardrail blocked."
        return answer

    @staticmethod
    def _error(handler: BaseHTTPRequestHandler, code: str, status: int, message: str) -> None:
        handler.send_response(status)
        data = json.dumps({"message": message}).encode()
        handler.send_header("x-amzn-ErrorType", f"{code}:http://internal.amazon.com/coral/")
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)


def main() -> None:
    """Serve, in a process of its own, a guardrail `grbench` version 1 that blocks `forbidden`:
    prints the URL, then serves until stopped."""
    with GuardrailEmulator() as bedrock:
        bedrock.guardrail("grbench", version="1", words=["forbidden"])
        print(bedrock.url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
