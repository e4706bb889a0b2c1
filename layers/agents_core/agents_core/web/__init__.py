"""HTTP layer: FastAPI routers per resource, request context, error mapping, the app factory.

FastAPI is first imported here, with the schemas of the pydantic models it defines left to
their first use: its OpenAPI document's models (some 40) would otherwise build theirs at
import, about 85 ms of CPU in every function's init, for a document only GET /openapi.json
serves. Its module also rebuilds three of them by name once they are all defined (Schema,
Operation, Encoding, whose fields name each other): about 20 ms more, left to the same first
use, where pydantic resolves those names from the module.
"""

import sys


def _import_fastapi() -> None:
    from pydantic import BaseModel
    from pydantic._internal import _config

    defaults = getattr(_config, "config_defaults", None)  # a model's config falls back to it
    if "fastapi" in sys.modules or not isinstance(defaults, dict):
        return
    before = defaults.get("defer_build", False)
    rebuild = BaseModel.__dict__["model_rebuild"]

    def deferred(cls, *args, **kwargs):
        if cls.__module__ == "fastapi.openapi.models" and not (args or kwargs):
            return None  # its module's own call; a first use's attempt passes arguments
        depth = kwargs.pop("_parent_namespace_depth", 2) + 1  # this frame is one more
        return rebuild.__func__(cls, *args, _parent_namespace_depth=depth, **kwargs)

    defaults["defer_build"] = True
    BaseModel.model_rebuild = classmethod(deferred)
    try:
        import fastapi.routing  # noqa: F401
    finally:
        defaults["defer_build"] = before
        BaseModel.model_rebuild = rebuild


_import_fastapi()
