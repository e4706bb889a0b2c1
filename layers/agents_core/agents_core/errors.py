"""The service's error kinds, each with the HTTP status it means to a client.

Stores, providers, engines and routes raise these; `status_of` answers for any exception, so the
web layer, both API faces and the queue worker decide statuses in one place. Anything else is a
bug and stays a 500, except an AWS call that failed for AWS's sake (throttled, down): 503.

    raise NotFound(f"Agent {agent_id} not found")     # 404 {"detail": "Agent ... not found"}
    status_of(err)                                   # 404
"""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """Base of the errors raised on purpose. `status` is the HTTP status."""

    status = 500


class InvalidRequest(ServiceError):
    """The request cannot be served as asked (call ids that do not match, text that cannot be
    stored, a feature the model or deployment lacks)."""

    status = 400


class Unauthenticated(ServiceError):
    """No caller identity where one is required (inside Lambda, behind API Gateway)."""

    status = 401


class NotFound(ServiceError):
    """Missing, expired, being deleted, or another tenant's: the same to every caller."""

    status = 404


class Conflict(ServiceError):
    """The state does not allow the change (a busy session, a turn not awaiting input)."""

    status = 409


class TooLarge(ServiceError):
    """Too large to store."""

    status = 413


class Unavailable(ServiceError):
    """Storage (or another AWS service) is unavailable for a moment: retry later."""

    status = 503


class UpstreamFailed(ServiceError):
    """The model failed: an error answer, a malformed or cut-off reply, no answer at all."""

    status = 502


class UpstreamTimeout(UpstreamFailed):
    """The model did not answer in time."""

    status = 504


class RunFailed(ServiceError):
    """A turn or response that started and then failed, as a non-streaming caller learns it:
    the status of the cause, its message, and the run's ids (`turn_id`, `response_id`).
    `retry`: the run was put back as it was before (a queued resume), so retrying may succeed."""

    def __init__(self, status: int, message: str, retry: bool = False, **ids: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry = retry
        self.ids = ids

    def body(self) -> dict[str, Any]:
        return {"detail": self.message, **self.ids}


def status_of(err: BaseException) -> int:
    """The HTTP status an exception means: its kind's, 503 for AWS unavailable, else 500."""
    if isinstance(err, ServiceError):
        return err.status
    if aws_unavailable(err):
        return 503
    return 500


#: Error codes of AWS calls that failed for the service's sake (throttled, overloaded, down).
_UNAVAILABLE_CODES = {
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "ThrottlingException",
    "InternalServerError",
    "ServiceUnavailable",
}


def aws_unavailable(err: BaseException) -> bool:
    """Whether `err` is an AWS call failing for AWS's sake, after the client's own retries: a
    client should try again later, nothing it sent was wrong."""
    from botocore.exceptions import ClientError, ConnectionError, HTTPClientError

    if isinstance(err, Unavailable):
        return True
    if isinstance(err, ClientError):
        status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return err.response.get("Error", {}).get("Code") in _UNAVAILABLE_CODES or status >= 500
    return isinstance(err, ConnectionError | HTTPClientError)
