"""Documents a caller names by URL (a Responses `input_file` with `file_url`), fetched as every
caller-named URL is: through the outbound guard, with a timeout and a bound on the bytes."""

from __future__ import annotations

from ..errors import InvalidRequest, TooLarge
from .guard import OutboundGuard


async def fetch_document(
    url: str, *, guard: OutboundGuard, timeout: float, max_bytes: int
) -> tuple[bytes, str]:
    """The document's bytes and media type. OutboundRefused (400) for a URL the guard refuses,
    TooLarge (413) past `max_bytes`, InvalidRequest (400) when it cannot be fetched."""
    import httpx

    from ._http import ResponseTooLarge, guarded_client

    await guard.check(url)
    try:
        async with guarded_client(guard, timeout=timeout, max_response_bytes=max_bytes) as client:
            response = await client.get(url)
            body = await response.aread()
    except ResponseTooLarge:
        raise TooLarge(f"The file at {url} is larger than {max_bytes} bytes") from None
    except httpx.HTTPError as err:
        raise InvalidRequest(f"The file at {url} could not be fetched: {err}") from None
    if response.status_code != 200:
        raise InvalidRequest(f"The file at {url} could not be fetched: {response.status_code}")
    media_type = response.headers.get("content-type", "application/octet-stream")
    return body, media_type.split(";")[0].strip()
