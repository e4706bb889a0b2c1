"""HTTP layer: FastAPI routers per resource, request context, error mapping, the app factory.

FastAPI is first imported here, with the schemas of the pydantic models it defines left to
their first use: its OpenAPI document's models (some 40) would otherwise build theirs at
import, about 85 ms of CPU in every function's init, for a document only GET /openapi.json
serves.
"""

import sys


def _import_fastapi() -> None:
    from pydantic._internal import _config

    defaults = getattr(_config, "config_defaults", None)  # a model's config falls back to it
    if "fastapi" in sys.modules or not isinstance(defaults, dict):
        return
    before = defaults.get("defer_build", False)
    defaults["defer_build"] = True
    try:
        import fastapi.routing  # noqa: F401
    finally:
        defaults["defer_build"] = before


_import_fastapi()
