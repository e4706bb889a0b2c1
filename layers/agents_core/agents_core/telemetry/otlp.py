"""Runs' spans over OTLP/HTTP in its JSON encoding (`POST {endpoint}/v1/traces`).

OpenTelemetry's Python exporters send protobuf, which would add some 2.5 MB (protobuf and
requests) to a layer kept under 25 MB; the JSON encoding is part of OTLP and every collector
and CloudWatch's endpoint take it, so the few fields a run's spans need are written here. An
endpoint on AWS (`https://xray.<region>.amazonaws.com`, CloudWatch's OTLP endpoint) is signed
with the function's credentials (SigV4, service `xray`).

Imported only when OTEL_EXPORTER_OTLP_ENDPOINT is set. An export goes over the lean HTTP/1.1
client the model's streams use (`http1`; no proxy), is bounded (its timeout) and never fails
the run: a collector that is down costs a warning.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from ..http1 import PostClient
from ..log import logger
from .spans import RunSpans, Span

#: The spans' instrumentation scope.
SCOPE = "serverless-agents"

_JSON = "application/json"
#: How much of a refusal's answer goes to the log.
_ANSWER_KEPT = 200

_AWS_ENDPOINT = re.compile(r"^https://xray\.([a-z0-9-]+)\.amazonaws\.com")


class OtlpExporter:
    def __init__(
        self,
        endpoint: str,
        *,
        service_name: str,
        timeout: float = 2.0,
        resource: dict[str, str] | None = None,
    ) -> None:
        self.url = endpoint.rstrip("/") + "/v1/traces"
        self.timeout = timeout
        self.resource = {"service.name": service_name, **(resource or {})}
        found = _AWS_ENDPOINT.match(self.url)
        self.aws_region = found.group(1) if found else None
        self._http = PostClient(
            self.url, {"Content-Type": _JSON}, timeout=timeout, connect_timeout=timeout
        )
        self._credentials: Any = None

    async def export(self, trace_id: str, run_index: int, run: RunSpans) -> None:
        body = json.dumps(self.payload(trace_id, run_index, run), separators=(",", ":")).encode()
        try:
            async with asyncio.timeout(self.timeout * 2):  # connect, then the answer
                signed = await asyncio.to_thread(self._signed, body) if self.aws_region else None
                answer = await self._http.post(body, signed)
                try:
                    said = b""
                    async for data in answer.body():
                        said = (said + data)[:_ANSWER_KEPT]
                finally:
                    answer.close()
            if not answer.is_success:
                logger.warning(
                    "spans not exported",
                    extra={"status": answer.status, "answer": said.decode(errors="replace")},
                )
        except Exception as err:
            logger.warning("spans not exported", extra={"error": type(err).__name__})

    def payload(self, trace_id: str, run_index: int, run: RunSpans) -> dict[str, Any]:
        """An ExportTraceServiceRequest with the run's spans."""
        spans = [
            _otlp(span, trace_id, own, parent)
            for span, own, parent in run.identified(trace_id, run_index)
        ]
        return {
            "resourceSpans": [
                {
                    "resource": {"attributes": _attributes(self.resource)},
                    "scopeSpans": [{"scope": {"name": SCOPE}, "spans": spans}],
                }
            ]
        }

    def _signed(self, body: bytes) -> dict[str, str]:
        """The SigV4 headers of an export to CloudWatch (besides Host and Content-Type)."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.session import get_session

        if self._credentials is None:  # they refresh themselves when they are temporary
            self._credentials = get_session().get_credentials()
        request = AWSRequest("POST", self.url, data=body, headers={"Content-Type": _JSON})
        SigV4Auth(self._credentials, "xray", self.aws_region).add_auth(request)
        return {k: v for k, v in request.headers.items() if k.lower() != "content-type"}


#: OpenTelemetry's span kinds: INTERNAL for the run and shield checks, CLIENT for calls out.
_SPAN_KIND = {"inference": 3, "run": 1, "shield_call": 1}


def _otlp(span: Span, trace_id: str, own_id: str, parent: str | None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": own_id,
        "name": span.name,
        "kind": _SPAN_KIND.get(span.kind, 3),
        "startTimeUnixNano": str(int(span.started_at.timestamp() * 1e6) * 1000),
        "endTimeUnixNano": str(int(span.completed_at.timestamp() * 1e6) * 1000),
        "attributes": _attributes({"serverless_agents.step_kind": span.kind, **span.attributes}),
        "status": {"code": 2 if span.status == "error" else 1},
    }
    if parent is not None:
        data["parentSpanId"] = parent
    return data


def _attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": name, "value": _value(value)} for name, value in values.items()]


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": str(value)}
