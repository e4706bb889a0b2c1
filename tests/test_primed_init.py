"""In Lambda a function's init builds what its first request would (`Services.prime`): on
demand init has a full vCPU and the first request only the memory's share; under SnapStart init
goes into the snapshot every new container resumes from. Outside Lambda (`make run`, tests) it
is left to the requests that use it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .lambda_support import ROOT

#: Run in a fresh interpreter, in the function's folder: its init (app.py), then what it left
#: unbuilt.
_INSPECT = """
import gc
import json
import sys
import app
from agents_core import http1, secrets
from agents_core.api import common
from agents_core.api.common import ApiModel

deferred, seen, todo = 0, set(), [ApiModel]
while todo:
    for model in todo.pop().__subclasses__():
        if model not in seen:
            seen.add(model)
            todo.append(model)
            deferred += not model.__pydantic_complete__
publisher = app.services.__dict__.get("publisher")
dynamodb = app.services.dynamodb
print(json.dumps({
    "adapters": [adapter.cache_info().currsize for adapter in common._ADAPTERS],
    "full_collections": gc.get_stats()[2]["collections"],
    "collecting": gc.isenabled(),
    "botocore_clients": dynamodb._made is not None
        or publisher is not None and publisher._events is not None and publisher._events._made is not None,
    "botocore_modules": sorted(m for m in sys.modules if m.startswith(("botocore.session", "botocore.client"))),
    "models": len(seen),
    "deferred": deferred,
    "events_client": publisher is not None and publisher._events is not None,
    "tls_contexts": http1.tls_context.cache_info().currsize,
    "secrets_client": secrets._client is not None,
    "secrets_read": len(secrets._values),
}))
"""


def _init(function: str, init_type: str | None, inspect: str = _INSPECT, **extra: str) -> dict:
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(ROOT / "layers" / "agents_core"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        **({"AWS_LAMBDA_INITIALIZATION_TYPE": init_type} if init_type else {}),
        "POWERTOOLS_METRICS_DISABLED": "true",
        "OPENAI_BASE_URL": "https://model.example/v1",
        "OPENAI_API_KEY_SECRET_ID": "model-key",
        **extra,
    }
    done = subprocess.run(
        [sys.executable, "-c", inspect],
        cwd=ROOT / "functions" / function,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("function", ["turns", "responses", "resume", "background"])
def test_in_lambda_a_function_s_init_builds_what_its_first_request_would(function):
    """Every API model it imported has its schema and every TypeAdapter made on first use is
    made, the TLS context its HTTPS clients share has its certificates loaded, and the
    lifecycle events' and Secrets Manager's clients exist (the model's key is not read: a
    rotated key reaches restored containers), on demand as under SnapStart; outside Lambda the
    same init leaves them to the first requests that use them. Either way, with keys and region
    in the environment, no botocore client is made, nor botocore's session imported: the JSON
    clients call DynamoDB and EventBridge without one. The garbage collector runs no full
    collection during init, and runs again once init is done."""
    for init_type in ("on-demand", "snap-start"):
        primed = _init(function, init_type)
        assert primed["models"] > 30, init_type
        assert primed["deferred"] == 0, init_type
        assert primed["events_client"], init_type
        assert primed["tls_contexts"] == 1, init_type
        assert primed["secrets_client"] and primed["secrets_read"] == 0  # the key is read later
        assert 0 not in primed["adapters"], init_type
        assert primed["adapters"] or function in ("responses", "background")  # no Agents stores
        assert not primed["botocore_clients"] and primed["botocore_modules"] == [], init_type
        # The collector waited for init to end (its heap lives as long as the container).
        assert primed["full_collections"] == 0 and primed["collecting"], init_type

    local = _init(function, None)
    assert local["models"] == primed["models"]
    assert local["deferred"] > 30
    assert not local["events_client"]
    assert local["tls_contexts"] == 0
    assert not local["secrets_client"]
    assert 1 not in local["adapters"]
    assert not local["botocore_clients"] and local["botocore_modules"] == []


_INSPECT_AUTHORIZER = """
import json
import app
from agents_core import http1
from agents_core.auth import tokens

print(json.dumps({
    "tls_contexts": http1.tls_context.cache_info().currsize,
    "jwks_context": tokens._tls_context.cache_info().currsize,
}))
"""


def test_in_lambda_the_authorizer_s_init_loads_the_certificates_its_first_call_would():
    """Its DynamoDB client's (the key store) and, with JWTs on, the JWKS fetch's: a new
    authorizer container's first request, on every API call it authorizes, no longer loads
    them at the authorizer's share of a CPU."""
    jwt = {"JWT_ISSUER": "https://issuer.example", "JWT_AUDIENCE": "app", "TABLE_NAME": "agents"}
    for init_type in ("on-demand", "snap-start"):
        primed = _init("authorizer", init_type, _INSPECT_AUTHORIZER, **jwt)
        assert primed == {"tls_contexts": 1, "jwks_context": 1}, init_type
    local = _init("authorizer", None, _INSPECT_AUTHORIZER, **jwt)
    assert local == {"tls_contexts": 0, "jwks_context": 0}


_INSPECT_OPENAPI = """
import json
import app
from fastapi.openapi import models
from agents_core.api.common import build_deferred

from pydantic import BaseModel

built = lambda: sorted(  # noqa: E731
    name for name, model in vars(models).items()
    if isinstance(model, type) and issubclass(model, BaseModel) and model is not BaseModel
    and model.__module__ == models.__name__ and model.__pydantic_complete__
)
before = built()
build_deferred()  # priming builds the API's models, not FastAPI's
primed = built()
paths = sorted(app.app.openapi()["paths"])
schema = models.Schema.model_validate({"type": "object", "properties": {"a": {"type": "string"}}})


class Later(BaseModel):  # pydantic's default is back: a model defined after builds at once
    n: int


print(json.dumps({"before": before, "primed": primed, "paths": paths,
                  "later": Later.__pydantic_complete__, "after": built(),
                  "schema": schema.properties["a"].type}))
"""


def test_fastapi_s_openapi_models_are_built_by_the_first_openapi_document_not_at_init():
    """About 85 ms of every function's init went to building the schemas of the OpenAPI
    document's models at FastAPI's import; the document is still whole when first asked for."""
    found = _init("turns", "on-demand", _INSPECT_OPENAPI)
    rebuilt_by_name = {"Schema", "Operation", "Encoding"}  # by fastapi.openapi.models itself
    assert not ({"OpenAPI"} | rebuilt_by_name) & set(found["before"] + found["primed"])
    # (OAuthFlows is built at import: FastAPI's OAuth2 makes one as a default)
    assert found["later"] is True
    assert {"OpenAPI", "Schema"} <= set(found["after"])
    assert found["schema"] == "string"  # a model whose fields name itself, built at first use
    assert "/v1/agents/{agent_id}/session/{session_id}/turn" in found["paths"]
