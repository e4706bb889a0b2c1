"""Bearer keys: the authorizer with API Gateway's own event shapes (TOKEN and REQUEST, as the
API Gateway developer guide shows them) on moto, the admin script, and the local server under
LOCAL_AUTH=keys driven by llama-stack-client and the openai SDK with nothing but `api_key=`."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys

import boto3
import httpx
import openai
import pytest
from agents_core.auth import BEARER_PATTERN, KeyStore, authenticate, hash_key
from agents_core.auth.authorizer import Unauthorized, authorize
from agents_core.auth.keys import InvalidKey
from agents_core.auth.store import keys_gsi1pk
from agents_core.auth.tokens import HEADER_PATTERN
from agents_core.errors import InvalidRequest, NotFound
from agents_core.store import keys as store_keys
from llama_stack_client import AuthenticationError, LlamaStackClient, NotFoundError
from moto import mock_aws

from .conftest import TABLE
from .lambda_support import ROOT
from .local_server import running_server
from .test_template import template

METHOD_ARN = "arn:aws:execute-api:us-east-1:123456789012:abcdef123/v0/GET/v1/agents"


def token_event(authorization: str | None) -> dict:
    """A TOKEN authorizer's input: the token source header's value and the method ARN."""
    event = {"type": "TOKEN", "methodArn": METHOD_ARN}
    if authorization is not None:
        event["authorizationToken"] = authorization
    return event


def request_event(headers: dict[str, str]) -> dict:
    """A REQUEST authorizer's input for `GET /v1/agents` (the developer guide's shape)."""
    return {
        "type": "REQUEST",
        "methodArn": METHOD_ARN,
        "resource": "/v1/agents",
        "path": "/v1/agents",
        "httpMethod": "GET",
        "headers": {"Accept": "*/*", "Host": "abcdef123.execute-api.us-east-1.amazonaws.com"}
        | headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": {},
        "multiValueQueryStringParameters": {},
        "pathParameters": {},
        "stageVariables": {},
        "requestContext": {
            "path": "/v0/v1/agents",
            "accountId": "123456789012",
            "resourceId": "05c7jb",
            "stage": "v0",
            "requestId": "e5a7bc4c-0a1b-4a3f-9cf6-0a7b5c2e7f0a",
            "identity": {"sourceIp": "203.0.113.7", "userAgent": "OpenAI/Python 1.0"},
            "resourcePath": "/v1/agents",
            "httpMethod": "GET",
            "apiId": "abcdef123",
        },
    }


@pytest.fixture
def keys(dynamodb) -> KeyStore:
    return KeyStore(dynamodb, TABLE)


def test_a_valid_key_in_a_token_event_allows_the_whole_stage_for_its_tenant(keys):
    issued = keys.create("acme", name="ci", usage_key="usage-value-of-acme-0123456789")
    answer = authorize(token_event(f"Bearer {issued.key}"), keys)
    assert answer["principalId"] == "acme"
    assert answer["context"] == {"tenant": "acme", "key_id": issued.record.key_id}
    (statement,) = answer["policyDocument"]["Statement"]
    assert statement == {
        "Action": "execute-api:Invoke",
        "Effect": "Allow",
        # every route of the stage: API Gateway reuses the cached answer for all of them
        "Resource": "arn:aws:execute-api:us-east-1:123456789012:abcdef123/v0/*",
    }
    assert answer["usageIdentifierKey"] == "usage-value-of-acme-0123456789"


def test_a_request_event_finds_the_header_in_whatever_case_the_client_sent(keys):
    issued = keys.create("acme")
    for name in ("Authorization", "authorization", "AUTHORIZATION"):
        answer = authorize(request_event({name: f"Bearer {issued.key}"}), keys)
        assert answer["principalId"] == "acme"
        assert "usageIdentifierKey" not in answer  # no usage plan key: none is sent


@pytest.mark.parametrize("shape", [token_event, lambda h: request_event({"Authorization": h})])
def test_revoked_unknown_and_malformed_keys_are_unauthorized(keys, shape):
    good = keys.create("acme")
    revoked = keys.create("acme")
    keys.revoke("acme", revoked.record.key_id)
    unknown = good.key[:-1] + ("A" if good.key[-1] != "A" else "B")
    for header in (
        f"Bearer {revoked.key}",
        f"Bearer {unknown}",
        good.key,  # no scheme
        f"Basic {good.key}",
        f"Bearer {good.key}x",
        f"Bearer {good.key[:20]}",
        "Bearer ",
        "",
    ):
        with pytest.raises(Unauthorized) as err:
            authorize(shape(header), keys)
        assert str(err.value) == "Unauthorized", header  # API Gateway's cue for a 401
    assert authorize(shape(f"Bearer {good.key}"), keys)["principalId"] == "acme"


def test_a_missing_header_is_unauthorized_in_both_shapes(keys):
    keys.create("acme")
    for event in (token_event(None), request_event({})):
        with pytest.raises(Unauthorized):
            authorize(event, keys)


def test_an_event_without_a_method_arn_is_unauthorized(keys):
    issued = keys.create("acme")
    event = token_event(f"Bearer {issued.key}")
    del event["methodArn"]
    with pytest.raises(Unauthorized):
        authorize(event, keys)


def test_api_gateway_refuses_the_same_malformed_headers_before_the_authorizer_runs(keys):
    """The template's ValidationExpression is the code's pattern: a header the code would refuse
    as malformed never costs an invocation."""
    api = template()["Resources"]["AgentsApi"]["Properties"]
    identity = api["Auth"]["Authorizers"]["BearerKeys"]["Identity"]
    assert identity["ValidationExpression"] == HEADER_PATTERN  # keys, or JWTs (test_jwt.py)
    key = keys.create("acme").key
    assert re.fullmatch(BEARER_PATTERN, f"Bearer {key}")
    assert re.fullmatch(HEADER_PATTERN, f"Bearer {key}")
    for header in (key, f"Basic {key}", f"Bearer {key}x", "Bearer sak_short"):
        assert not re.fullmatch(BEARER_PATTERN, header)
        assert not re.fullmatch(HEADER_PATTERN, header)


def test_only_the_keys_hash_is_stored(keys, dynamodb):
    issued = keys.create("acme", name="laptop")
    items = dynamodb.scan(TableName=TABLE)["Items"]
    assert issued.key not in json.dumps(items)
    secret = issued.key.split("_", 2)[2]  # sak_<key id>_<secret>; the secret may hold "_"
    assert len(secret) == 43
    assert secret not in json.dumps(items)
    assert {i["PK"]["S"] for i in items} == {f"APIKEY#{hash_key(issued.key)}"}
    assert len(hash_key(issued.key)) == 64


def test_keys_are_listed_per_tenant_by_id_and_revoked_by_id(keys):
    a1 = keys.create("acme", name="one")
    a2 = keys.create("acme", name="two")
    b1 = keys.create("globex")
    assert [r.key_id for r in keys.list("acme")] == [a1.record.key_id, a2.record.key_id]
    assert [r.key_id for r in keys.list("globex")] == [b1.record.key_id]
    assert keys.list("acme")[0].display == f"sak_{a1.record.key_id}_..."
    revoked = keys.revoke("acme", a1.record.key_id)
    assert revoked.revoked_at is not None
    assert keys.revoke("acme", a1.record.key_id).revoked_at == revoked.revoked_at
    with pytest.raises(NotFound):
        keys.revoke("globex", a2.record.key_id)  # another tenant's key id
    with pytest.raises(InvalidKey):
        authenticate(f"Bearer {a1.key}", keys)
    assert authenticate(f"Bearer {a2.key}", keys).tenant == "acme"
    assert authenticate(f"Bearer {b1.key}", keys).tenant == "globex"


def test_tenant_names_that_could_break_keys_are_refused(keys, dynamodb):
    for tenant in ("", "a#b", "a b", "-x", "x" * 129):
        with pytest.raises(InvalidRequest):
            keys.create(tenant)
    assert dynamodb.scan(TableName=TABLE)["Items"] == []


def test_the_key_list_is_tenant_first_like_every_other_key():
    for tenant in ("acme", "a%b"):
        tenant_part = store_keys.agents_gsi1pk(tenant).removesuffix("#AGENTS")
        assert keys_gsi1pk(tenant) == f"{tenant_part}#APIKEYS"


def test_the_authorizer_entry_point_answers_from_the_table(monkeypatch):
    """functions/authorizer/app.py as Lambda imports and calls it."""
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        from agents_core.store.schema import create_table_if_missing

        create_table_if_missing(client, TABLE)
        issued = KeyStore(client, TABLE).create("acme")
        spec = importlib.util.spec_from_file_location(
            "authorizer_app", ROOT / "functions" / "authorizer" / "app.py"
        )
        app = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(app)

        class Context:
            function_name, memory_limit_in_mb = "authorizer", 256
            invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:authorizer"
            aws_request_id = "req-1"

        answer = app.handler(token_event(f"Bearer {issued.key}"), Context())
        assert answer["principalId"] == "acme"
        with pytest.raises(Unauthorized):
            app.handler(token_event("Bearer nope"), Context())


# ---- the admin script ----


def _script():
    spec = importlib.util.spec_from_file_location("api_keys", ROOT / "scripts" / "api_keys.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_admin_script_puts_each_tenant_in_the_usage_plan_once(dynamodb):
    script = _script()
    apigateway = boto3.client("apigateway", region_name="us-east-1")
    plan = apigateway.create_usage_plan(name="tenants")["id"]

    def run(*argv):
        args = script.parser().parse_args(["--table", TABLE, "--usage-plan-id", plan, *argv])
        return script.run(args, dynamodb, TABLE, apigateway)

    first = run("create", "acme", "--name", "ci")
    second = run("create", "acme")
    other = run("create", "globex")
    assert first["key"].startswith(f"sak_{first['key_id']}_")
    assert first["status"] == "active" and first["name"] == "ci" and "usage_key" not in first
    plan_keys = apigateway.get_usage_plan_keys(usagePlanId=plan)["items"]
    assert sorted(k["name"] for k in plan_keys) == [f"{plan}/acme", f"{plan}/globex"]
    store = KeyStore(dynamodb, TABLE)
    a, b, c = (store.lookup(x["key"]) for x in (first, second, other))
    assert a.usage_key == b.usage_key != c.usage_key  # one usage key per tenant
    values = {
        k["name"]: apigateway.get_api_key(apiKey=k["id"], includeValue=True)["value"]
        for k in plan_keys
    }
    assert values == {f"{plan}/acme": a.usage_key, f"{plan}/globex": c.usage_key}
    # the authorizer hands API Gateway that tenant's usage key
    answer = authorize(token_event(f"Bearer {second['key']}"), store)
    assert answer["usageIdentifierKey"] == a.usage_key

    listed = run("list", "acme")
    assert [k["key_id"] for k in listed] == [first["key_id"], second["key_id"]]
    assert all("key" not in k and "usage_key" not in k for k in listed)
    assert first["key"] not in json.dumps(listed)
    revoked = run("revoke", "acme", first["key_id"])
    assert revoked["status"] == "revoked"
    assert [k["status"] for k in run("list", "acme")] == ["revoked", "active"]
    with pytest.raises(Unauthorized):
        authorize(token_event(f"Bearer {first['key']}"), store)


def test_attach_moves_a_tenants_keys_into_a_new_usage_plan(dynamodb):
    """A stack deployed again over its kept table has a new plan: the tenant's keys follow."""
    script = _script()
    apigateway = boto3.client("apigateway", region_name="us-east-1")
    old_plan = apigateway.create_usage_plan(name="old")["id"]
    new_plan = apigateway.create_usage_plan(name="new")["id"]

    def run(plan, *argv):
        args = script.parser().parse_args(["--table", TABLE, "--usage-plan-id", plan, *argv])
        return script.run(args, dynamodb, TABLE, apigateway)

    key = run(old_plan, "create", "acme")["key"]
    store = KeyStore(dynamodb, TABLE)
    before = authorize(token_event(f"Bearer {key}"), store)["usageIdentifierKey"]
    assert [k["status"] for k in run(new_plan, "attach", "acme")] == ["active"]
    after = authorize(token_event(f"Bearer {key}"), store)["usageIdentifierKey"]
    (in_new_plan,) = apigateway.get_usage_plan_keys(usagePlanId=new_plan)["items"]
    assert after != before
    assert apigateway.get_api_key(apiKey=in_new_plan["id"], includeValue=True)["value"] == after
    assert (
        run(new_plan, "attach", "acme")
        and len(apigateway.get_usage_plan_keys(usagePlanId=new_plan)["items"]) == 1
    )  # attaching again changes nothing


def test_the_admin_script_refuses_an_unknown_key_id_and_a_missing_table(dynamodb):
    script = _script()
    args = script.parser().parse_args(["--table", TABLE, "revoke", "acme", "0123456789ab"])
    with pytest.raises(NotFound):
        script.run(args, dynamodb, TABLE)
    assert dynamodb.scan(TableName=TABLE)["Items"] == []
    with pytest.raises(SystemExit):
        script.parser().parse_args(["create", "acme"])  # where the keys go is required


# ---- the local server with LOCAL_AUTH=keys, both clients ----


def _cli(port: int, *argv: str) -> dict | list:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "api_keys.py"), "--local", str(port), *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def keyed_server(model):
    env = {"LOCAL_AUTH": "keys", "OPENAI_BASE_URL": model.url}
    with running_server(env) as (base, banner):
        port = int(base.rsplit(":", 1)[1])
        yield base, banner, port


def both_clients_answer(base: str, api_key: str, model):
    """A turn through llama-stack-client and a response through the openai SDK, each passing
    only `api_key`: (the agent, its session, the SDK client, the response)."""
    llama = LlamaStackClient(base_url=base, api_key=api_key, timeout=30, max_retries=0)
    agent = llama.agents.create(agent_config={"model": "llama3.2:3b", "instructions": "Be brief."})
    session = llama.agents.session.create(agent.agent_id, session_name="keyed")
    model.reply(text="Hello from the model.")
    turn = llama.agents.turn.create(
        session.session_id,
        agent_id=agent.agent_id,
        messages=[{"role": "user", "content": "hi"}],
        stream=False,
    )
    assert turn.output_message.content == "Hello from the model."
    sdk = openai.OpenAI(base_url=f"{base}/v1/openai/v1", api_key=api_key, max_retries=0)
    model.reply(text="Responses too.")
    response = sdk.responses.create(model="llama3.2:3b", input="hi")
    assert response.output_text == "Responses too."
    return agent, session, sdk, response


def test_both_clients_get_answers_with_their_key_and_tenants_stay_apart(keyed_server, model):
    base, banner, port = keyed_server
    assert "callers need a Bearer key" in banner
    acme = _cli(port, "create", "acme", "--name", "e2e")["key"]
    globex = _cli(port, "create", "globex")["key"]

    agent, session, sdk, response = both_clients_answer(base, acme, model)

    # The other tenant's key sees none of it.
    other = LlamaStackClient(base_url=base, api_key=globex, timeout=30, max_retries=0)
    with pytest.raises(NotFoundError):
        other.agents.session.retrieve(session.session_id, agent_id=agent.agent_id)
    other_sdk = openai.OpenAI(base_url=f"{base}/v1/openai/v1", api_key=globex, max_retries=0)
    with pytest.raises(openai.NotFoundError):
        other_sdk.responses.retrieve(response.id)
    assert sdk.responses.retrieve(response.id).id == response.id
    listed = httpx.get(f"{base}/v1/agents", headers={"Authorization": f"Bearer {globex}"})
    assert listed.status_code == 200 and listed.json()["data"] == []
    # Nor their traces, which the owner reads.
    turns = llama_turns(base, acme, agent.agent_id, session.session_id)
    traces = [f"{base}/v1/responses/{response.id}/trace", f"{turns[0]}/trace"]
    for url in traces:
        assert httpx.get(url, headers={"Authorization": f"Bearer {globex}"}).status_code == 404
        assert httpx.get(url, headers={"Authorization": f"Bearer {acme}"}).json()["complete"]


def llama_turns(base: str, key: str, agent_id: str, session_id: str) -> list[str]:
    """The URLs of a session's turns, read with `key`."""
    session = httpx.get(
        f"{base}/v1/agents/{agent_id}/session/{session_id}",
        headers={"Authorization": f"Bearer {key}"},
    ).json()
    path = f"{base}/v1/agents/{agent_id}/session/{session_id}/turn"
    return [f"{path}/{turn['turn_id']}" for turn in session["turns"]]


def test_a_compaction_or_reasoning_blob_reads_back_only_for_the_tenant_it_was_made_for(
    keyed_server, model
):
    base, _, port = keyed_server
    keys = {name: _cli(port, "create", name)["key"] for name in ("hooli", "pied-piper")}
    sdks = {
        name: openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)
        for name, key in keys.items()
    }
    model.reply(text="Summary: they met.")
    compacted = sdks["hooli"].responses.compact(model="m", input="We met in Paris.")
    model.reply(reasoning="Hmm.", text="ok")
    reasoned = sdks["hooli"].responses.create(
        model="m", input="hi", store=False, include=["reasoning.encrypted_content"]
    )
    blobs = [compacted.output[-1].model_dump(exclude_none=True)]
    blobs.append(reasoned.output[0].model_dump(exclude_none=True))
    for blob in blobs:
        replay = [blob, {"role": "user", "content": "go on"}]
        with pytest.raises(openai.BadRequestError) as refused:
            sdks["pied-piper"].responses.create(model="m", input=replay, store=False)
        assert "encrypted_content" in refused.value.message
        model.reply(text="on we go")
        mine = sdks["hooli"].responses.create(model="m", input=replay, store=False)
        assert mine.output_text == "on we go"


def test_no_key_a_wrong_key_and_a_revoked_key_get_401(keyed_server):
    base, _, port = keyed_server
    created = _cli(port, "create", "initech")
    good = created["key"]
    assert httpx.get(f"{base}/v1/agents").status_code == 401
    wrong = good[:-1] + ("A" if good[-1] != "A" else "B")
    for header in (f"Bearer {wrong}", f"Basic {good}", good):
        assert httpx.get(f"{base}/v1/agents", headers={"Authorization": header}).status_code == 401
    assert (
        httpx.get(f"{base}/v1/agents", headers={"Authorization": f"Bearer {good}"}).status_code
        == 200
    )

    sdk = openai.OpenAI(base_url=f"{base}/v1/openai/v1", api_key=wrong, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        sdk.responses.create(model="m", input="hi")
    with pytest.raises(AuthenticationError):
        LlamaStackClient(base_url=base, api_key=wrong, max_retries=0).agents.create(
            agent_config={"model": "m", "instructions": "i"}
        )

    assert _cli(port, "revoke", "initech", created["key_id"])["status"] == "revoked"
    revoked = httpx.get(f"{base}/v1/agents", headers={"Authorization": f"Bearer {good}"})
    assert revoked.status_code == 401
    assert "Bearer" in revoked.json()["detail"]
    assert [k["status"] for k in _cli(port, "list", "initech")] == ["revoked"]


def test_without_local_auth_the_server_needs_no_key(model):
    with running_server({"OPENAI_BASE_URL": model.url}) as (base, banner):
        assert "no key needed (tenant default)" in banner
        assert httpx.get(f"{base}/v1/agents").status_code == 200


def test_the_authorizers_answer_names_the_tenant_in_the_function_behind_it(keys, monkeypatch):
    """What API Gateway passes on from the answer (principalId and the context's keys in
    requestContext.authorizer; the usage plan key's id as identity.apiKeyId) reaches the agents
    function as the key's tenant, inside Lambda."""
    from .lambda_support import LambdaContext, load_event, load_function

    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "AgentsFunction")
    handler = load_function("agents").handler
    acme = authorize(token_event(f"Bearer {keys.create('acme').key}"), keys)
    globex = authorize(token_event(f"Bearer {keys.create('globex').key}"), keys)

    def as_caller(event: dict, answer: dict | None) -> dict:
        context = event["requestContext"]
        context["identity"] = {"apiKeyId": "usage-plan-key-id", "sourceIp": "203.0.113.7"}
        context.pop("authorizer", None)
        if answer:
            context["authorizer"] = {
                "principalId": answer["principalId"],
                **answer["context"],
                "integrationLatency": 41,
            }
        return event

    created = handler(as_caller(load_event("agents/create_agent.json"), acme), LambdaContext())
    assert created["statusCode"] == 200, created
    agent_id = json.loads(created["body"])["agent_id"]

    def listed(answer):
        reply = handler(as_caller(load_event("agents/list_agents.json"), answer), LambdaContext())
        return reply["statusCode"], [
            a["agent_id"] for a in json.loads(reply["body"]).get("data", [])
        ]

    assert listed(acme) == (200, [agent_id])
    assert listed(globex) == (200, [])
