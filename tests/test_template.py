"""template.yaml: cfn-lint clean, and the table it declares is the one the code creates locally."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml
from agents_core.store.schema import TABLE_DEFINITION, TTL_ATTRIBUTE

from .lambda_support import ROOT


class _CfnLoader(yaml.SafeLoader):
    """Reads CloudFormation short-form tags (!Ref, !Sub, ...) as plain values."""


def _tag(loader, suffix, node):
    if isinstance(node, yaml.ScalarNode):
        return f"!{suffix} {loader.construct_scalar(node)}"
    return (
        {f"!{suffix}": loader.construct_sequence(node)}
        if isinstance(node, yaml.SequenceNode)
        else None
    )


_CfnLoader.add_multi_constructor("!", _tag)


def template() -> dict:
    return yaml.load((ROOT / "template.yaml").read_text(), Loader=_CfnLoader)


def statements(resource: dict) -> list[dict]:
    """A function's policy statements, those of conditional (`!If`) policies included."""
    found = []
    for policy in resource["Properties"]["Policies"]:
        branches = policy["!If"][1:] if "!If" in policy else [policy]
        for branch in branches:
            if isinstance(branch, dict):
                found += branch.get("Statement", [])
    return found


def functions(resources: dict) -> dict[str, dict]:
    return {
        name: resource
        for name, resource in resources.items()
        if resource["Type"] == "AWS::Serverless::Function"
    }


def table_actions(function: str) -> set[str]:
    """The DynamoDB actions a function's policy in template.yaml allows on the table."""
    statements_ = statements(template()["Resources"][function])
    return {
        action
        for statement in statements_
        if statement["Effect"] == "Allow"
        for action in statement["Action"]
        if action.startswith("dynamodb:")
    }


def test_cfn_lint_reports_nothing():
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    result = subprocess.run(
        [str(cfn_lint), "template.yaml"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_the_layer_is_built_for_the_runtime_and_architecture_every_function_runs():
    from .test_built_artifacts import _build_layer_module

    target = _build_layer_module().LAMBDA
    declared = template()
    runtime, architectures = (
        declared["Globals"]["Function"][key] for key in ("Runtime", "Architectures")
    )
    layer = declared["Resources"]["AgentsCoreLayer"]["Properties"]
    assert runtime == f"python{target.python_version}" == target.name.split("-")[1]
    assert layer["CompatibleRuntimes"] == [runtime]
    assert architectures == layer["CompatibleArchitectures"] == ["arm64"]
    assert all(platform.endswith("_aarch64") for platform in target.platforms)
    for name, resource in declared["Resources"].items():
        if resource["Type"] == "AWS::Serverless::Function":
            assert "Runtime" not in resource["Properties"], name  # each runs the Globals' one


def test_template_table_matches_the_local_definition():
    table = template()["Resources"]["AgentsTable"]["Properties"]
    assert table["BillingMode"] == TABLE_DEFINITION["BillingMode"]
    assert table["KeySchema"] == TABLE_DEFINITION["KeySchema"]
    assert sorted(table["AttributeDefinitions"], key=str) == sorted(
        TABLE_DEFINITION["AttributeDefinitions"], key=str
    )
    assert table["GlobalSecondaryIndexes"] == TABLE_DEFINITION["GlobalSecondaryIndexes"]
    assert table["TimeToLiveSpecification"] == {"AttributeName": TTL_ATTRIBUTE, "Enabled": True}
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}


def test_functions_may_touch_only_the_table():
    for name, resource in functions(template()["Resources"]).items():
        for statement in statements(resource):
            actions = statement["Action"]
            dynamo = [a for a in actions if a.startswith("dynamodb:")]
            assert "dynamodb:*" not in actions and "dynamodb:Scan" not in dynamo, name
            if dynamo and name != "AuthorizerFunction":
                assert statement["Resource"] == [
                    "!GetAtt AgentsTable.Arn",
                    "!Sub ${AgentsTable.Arn}/index/*",
                ], name


def test_the_authorizer_may_only_get_key_items():
    """It reads one item by its key's hash, or a JWT tenant's usage key: GetItem on those
    partitions, nothing else."""
    (statement,) = statements(template()["Resources"]["AuthorizerFunction"])
    assert statement["Action"] == ["dynamodb:GetItem"]
    assert statement["Resource"] == ["!GetAtt AgentsTable.Arn"]  # no index
    assert statement["Condition"] == {
        # ...and a JWT tenant's usage plan key item (agents_core.auth.store.usage_pk)
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["APIKEY#*", "T#*#USAGE"]}
    }


def test_queue_dlq_bus_and_the_resume_event_source():
    resources = template()["Resources"]
    queue = resources["ResumeQueue"]["Properties"]
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == "!GetAtt ResumeDeadLetterQueue.Arn"
    assert resources["TurnEventBus"]["Type"] == "AWS::Events::EventBus"
    consumer = resources["ResumeQueueFunction"]["Properties"]
    source = consumer["Events"]["ResumeQueueMessages"]
    assert source["Type"] == "SQS" and source["Properties"]["FunctionResponseTypes"] == [
        "ReportBatchItemFailures"
    ]
    # Visibility covers the consumer's timeout with room for retries.
    assert queue["VisibilityTimeout"] >= 6 * consumer["Timeout"]
    # The consumer is the resume function's app and rights, buffered (see the next test), and
    # may send to its own queue (a parked turn's continuation).
    resume = resources["ResumeFunction"]["Properties"]
    for same in ("CodeUri", "Handler", "Layers"):
        assert consumer[same] == resume[same], same
    own = [
        s
        for s in statements(resources["ResumeQueueFunction"])
        if s.get("Sid") != "TurnContinuations"
    ]
    assert own == statements(resources["ResumeFunction"])
    (sends,) = [
        s
        for s in statements(resources["ResumeQueueFunction"])
        if s.get("Sid") == "TurnContinuations"
    ]
    assert (sends["Action"], sends["Resource"]) == ("sqs:SendMessage", "!GetAtt ResumeQueue.Arn")
    for name in ("TurnsFunction", "ResumeFunction", "ResumeQueueFunction"):
        first = resources[name]["Properties"]["Policies"][0]["Statement"]
        puts = [s for s in first if s["Action"] == "events:PutEvents"]
        assert puts and puts[0]["Resource"] == "!GetAtt TurnEventBus.Arn", name


def test_web_adapter_functions_stream_only_for_api_gateway():
    """In response_stream mode the Web Adapter streams every answer, an SQS batch's too, which
    Lambda's SQS poller cannot read: streaming functions have streamed API routes only, and the
    queue's consumer runs buffered."""
    for name, resource in functions(template()["Resources"]).items():
        env = resource["Properties"].get("Environment", {}).get("Variables", {})
        events = resource["Properties"].get("Events", {})
        kinds = {event["Type"] for event in events.values()}
        if env.get("AWS_LWA_INVOKE_MODE") == "response_stream":
            # ...and a buffered integration would take the streamed answer for a malformed one.
            assert kinds == {"Api"}, name
            for event in events.values():
                assert event["Properties"]["ResponseTransferMode"] == "RESPONSE_STREAM", name
        if "SQS" in kinds and resource["Properties"]["Handler"] == "run.sh":  # the Web Adapter's
            assert env["AWS_LWA_INVOKE_MODE"] == "buffered", name
            assert env["AWS_LWA_PASS_THROUGH_PATH"] == "/events", name


def test_the_model_api_key_is_read_from_its_secret_never_passed_in_the_environment():
    """Functions that call models get the secret's name and the right to read that one
    secret; no function's environment holds a key, and no parameter takes one."""
    doc = template()
    assert not [p for p in doc["Parameters"].values() if p.get("NoEcho")]
    secret_arn = (
        "!Sub arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}"
        ":secret:${ModelApiKeySecretName}-??????"
    )
    callers = sealers = 0
    for name, resource in functions(doc["Resources"]).items():
        env = resource["Properties"].get("Environment", {}).get("Variables", {})
        assert not [v for v in env if "KEY" in v and not v.endswith("_SECRET_ID")], name
        reads = [s for s in statements(resource) if "secretsmanager:GetSecretValue" in s["Action"]]
        secrets = []
        if "OPENAI_BASE_URL" in env:
            callers += 1
            assert env["OPENAI_API_KEY_SECRET_ID"] == "!Ref ModelApiKeySecretName", name
            secrets.append(secret_arn)
        if "SEALING_KEY_SECRET_ID" in env:  # the key of the blobs clients replay
            sealers += 1
            assert env["SEALING_KEY_SECRET_ID"] == "!Ref SealingKeySecret", name
            secrets.append("!Ref SealingKeySecret")
        assert sorted(s["Resource"] for s in reads) == sorted(secrets), name
    assert (callers, sealers) == (5, 2)
    key = doc["Resources"]["SealingKeySecret"]["Properties"]["GenerateSecretString"]
    assert key["PasswordLength"] >= 32  # generated by Secrets Manager, never in the template


def test_every_function_logs_to_a_group_with_the_retention_parameter():
    resources = template()["Resources"]
    groups = {
        r["Properties"]["LogGroupName"]: r["Properties"]["RetentionInDays"]
        for r in resources.values()
        if r["Type"] == "AWS::Logs::LogGroup"
    }
    for name in functions(resources):
        assert groups.pop(f"!Sub /aws/lambda/${{{name}}}") == "!Ref LogRetentionDays", name
    assert groups == {"!Sub /aws/apigateway/${AWS::StackName}/access": "!Ref LogRetentionDays"}


def test_the_api_stage_writes_json_access_logs_to_its_group():
    api = template()["Resources"]["AgentsApi"]
    setting = api["Properties"]["AccessLogSetting"]
    assert setting["DestinationArn"] == "!GetAtt ApiAccessLogs.Arn"
    line = json.loads(setting["Format"])  # one JSON object per request
    assert line["requestId"] == "$context.requestId"
    assert line["apiKeyId"] == "$context.identity.apiKeyId"  # the tenant, never the key
    assert api["DependsOn"] == "ApiGatewayAccount"  # the account's logging role comes first


def test_alarms_watch_the_dead_letter_queue_and_each_functions_errors_and_throttles():
    resources = template()["Resources"]
    alarms = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    watched = {
        (a["MetricName"], a["Dimensions"][0]["Value"])
        for a in alarms
        if a["AlarmActions"] == ["!Ref AlarmTopic"]
    }
    expected = {
        ("ApproximateNumberOfMessagesVisible", f"!GetAtt {queue}.QueueName")
        for queue in ("ResumeDeadLetterQueue", "BackgroundDeadLetterQueue", "IngestDeadLetterQueue")
    }
    expected |= {
        (metric, f"!Ref {name}")
        for name in functions(resources)
        for metric in ("Errors", "Throttles")
    }
    assert watched == expected
    subscription = resources["AlarmEmailSubscription"]
    assert subscription["Condition"] == "HasAlarmEmail"
    assert subscription["Properties"]["Endpoint"] == "!Ref AlarmEmail"


_RESPONSES = {
    ("", "post"),
    ("", "get"),
    ("/{response_id}", "get"),
    ("/{response_id}", "delete"),
    ("/{response_id}/input_items", "get"),
    ("/{response_id}/trace", "get"),
    ("/{response_id}/cancel", "post"),
    ("/input_tokens", "post"),
    ("/compact", "post"),
}
_CONVERSATIONS = {
    ("", "post"),
    ("", "get"),
    ("/{conversation_id}", "get"),
    ("/{conversation_id}", "post"),
    ("/{conversation_id}", "delete"),
    ("/{conversation_id}/items", "post"),
    ("/{conversation_id}/items", "get"),
    ("/{conversation_id}/items/{item_id}", "get"),
    ("/{conversation_id}/items/{item_id}", "delete"),
}
STREAMED = (
    {
        (f"{agents}/{{agent_id}}/session/{{session_id}}/turn{rest}", method)
        for agents in ("/v1/agents", "/v1alpha/agents")
        for rest, method in (
            ("", "post"),
            ("/{turn_id}/resume", "post"),
            ("/{turn_id}/stream", "get"),
            ("/{turn_id}", "get"),  # a turn or a step may pass a buffered Lambda's 6 MB
            ("/{turn_id}/step/{step_id}", "get"),
            ("/{turn_id}/trace", "get"),
        )
    }
    | {
        (f"{prefix}/responses{path}", method)
        for prefix in ("/v1/openai/v1", "/v1")
        for path, method in _RESPONSES
    }
    | {
        (f"{prefix}/conversations{path}", method)
        for prefix in ("/v1", "/v1/openai/v1")
        for path, method in _CONVERSATIONS
    }
    | {("/v1/models", "get"), ("/v1/openai/v1/models", "get"), ("/v1/health", "get")}
)


def sam_transform() -> dict:
    """template.yaml through SAM's own transform (what CloudFormation deploys), the local code
    paths replaced by S3 URIs as `sam package` does."""
    from samtranslator.translator.transform import transform
    from samtranslator.yaml_helper import yaml_parse

    class Policies:  # the managed policies SAM attaches to function roles
        def load(self) -> dict:
            names = {
                "AWSLambdaBasicExecutionRole": "service-role/",
                "AWSLambdaSQSQueueExecutionRole": "service-role/",
                "AWSXrayWriteOnlyAccess": "",
            }
            return {n: f"arn:aws:iam::aws:policy/{p}{n}" for n, p in names.items()}

    text = (ROOT / "template.yaml").read_text()
    text = re.sub(r"(CodeUri|ContentUri): \S+", r"\1: s3://bucket/key", text)
    return transform(yaml_parse(text), {}, Policies())


def test_every_route_of_the_apps_is_deployed_and_nothing_else():
    """The routes the functions' apps serve (aliases included) are the template's, each on the
    function whose app serves it."""
    from agents_core.services import Services
    from agents_core.settings import Settings
    from agents_core.web.agents import router as agents_router
    from agents_core.web.app import create_app
    from agents_core.web.conversations import router as conversations_router
    from agents_core.web.discovery import router as discovery_router
    from agents_core.web.embeddings import router as embeddings_router
    from agents_core.web.files import files_router, vector_stores_router
    from agents_core.web.playground import router as playground_router
    from agents_core.web.prompts import router as prompts_router
    from agents_core.web.responses import router as responses_router
    from agents_core.web.safety import safety_router, shields_router
    from agents_core.web.tools import router as tools_router
    from agents_core.web.turns import resume_router, turns_router

    apps = {
        "AgentsFunction": (
            agents_router,
            tools_router,
            shields_router,
            safety_router,
            embeddings_router,
            files_router,
            vector_stores_router,
            prompts_router,
            playground_router,
        ),
        "TurnsFunction": (turns_router,),
        "ResumeFunction": (resume_router,),
        "ResponsesFunction": (responses_router, conversations_router, discovery_router),
    }
    resources = template()["Resources"]
    for name, routers in apps.items():
        app = create_app(*routers, services=Services(Settings()))
        served = {
            (path, method)
            for path, operations in app.openapi()["paths"].items()
            for method in operations
        }
        if name == "AgentsFunction":  # the playground's page and files, not in the schema
            served |= PLAYGROUND
        events = resources[name]["Properties"]["Events"].values()
        deployed = {  # a greedy `{x+}` is the app's `{x:path}`
            (e["Properties"]["Path"].replace("+}", "}"), e["Properties"]["Method"])
            for e in events
            if e["Type"] == "Api"
        }
        assert served == deployed, name


BUFFERED_ROUTES = 76  # 33 + files and vector stores (17 under two prefixes) + prompts (7) + 2
PLAYGROUND = {("/playground", "get"), ("/playground/{asset}", "get")}


def test_sam_deploys_the_streaming_routes_as_streams_and_the_rest_buffered():
    """SAM ignores a ResponseTransferMode it does not know (STREAM): the route then deploys
    buffered, cut at 29 seconds, and nothing else notices."""
    resources = sam_transform()["Resources"]
    api = resources["AgentsApi"]["Properties"]
    assert api["EndpointConfiguration"]["Types"] == ["REGIONAL"]
    streamed, buffered = set(), set()
    for path, methods in api["Body"]["paths"].items():
        for method, spec in methods.items():
            integration = spec.get("x-amazon-apigateway-integration")
            if not integration:
                continue
            uri = integration["uri"]["Fn::Sub"]
            if integration.get("responseTransferMode") == "STREAM":
                assert "/response-streaming-invocations" in uri, (path, method)
                streamed.add((path, method))
            else:
                assert uri.endswith("/invocations"), (path, method)
                buffered.add((path, method))
    assert streamed == STREAMED
    # The agents function's routes (Mangum): agents under /v1 and /v1alpha, tools, shields,
    # embeddings.
    assert len(buffered) == BUFFERED_ROUTES
    stage = next(r for r in resources.values() if r["Type"] == "AWS::ApiGateway::Stage")
    assert stage["Properties"]["AccessLogSetting"]["DestinationArn"] == {
        "Fn::GetAtt": ["ApiAccessLogs", "Arn"]
    }


# ---- Authentication, bounded spend, least privilege ----


def test_every_route_needs_a_bearer_key_checked_by_the_cached_authorizer():
    resources = sam_transform()["Resources"]
    api = resources["AgentsApi"]["Properties"]
    assert api["ApiKeySourceType"] == "AUTHORIZER"  # the authorizer names the usage plan key
    body = api["Body"]
    authorizer = body["securityDefinitions"]["BearerKeys"]
    assert authorizer["name"] == "Authorization"
    settings = authorizer["x-amazon-apigateway-authorizer"]
    assert settings["type"] == "token"
    # SAM fills in the parameter's value (CloudFormation hands the transform the stack's values)
    cache = template()["Parameters"]["AuthorizerCacheSeconds"]
    assert settings["authorizerResultTtlInSeconds"] == cache["Default"] == 300
    identity = template()["Resources"]["AgentsApi"]["Properties"]["Auth"]["Authorizers"]
    assert identity["BearerKeys"]["Identity"]["ReauthorizeEvery"] == "!Ref AuthorizerCacheSeconds"
    assert settings["authorizerUri"]["Fn::Sub"][1]["__FunctionArn__"] == {
        "Ref": "AuthorizerFunctionAliaslive"  # the published version: SnapStart's
    }
    routes = 0
    for path, methods in body["paths"].items():
        for method, spec in methods.items():
            routes += 1
            if (path, method) in PLAYGROUND:  # a static page: its API calls carry the key
                assert spec.get("security", []) in ([], [{"NONE": []}]), (path, method)
                continue
            # the authorizer and a usage plan key (api_key: from the authorizer) on every route
            assert spec["security"] == [{"BearerKeys": []}, {"api_key": []}], (path, method)
    assert routes == len(STREAMED) + BUFFERED_ROUTES  # the streamed and the agents function's
    unauthorized = body["x-amazon-apigateway-gateway-responses"]["UNAUTHORIZED"]
    assert unauthorized["statusCode"] == "401"
    assert unauthorized["responseParameters"] == {
        "gatewayresponse.header.WWW-Authenticate": "'Bearer'"
    }
    permission = resources["AgentsApiBearerKeysAuthorizerPermission"]["Properties"]
    assert permission["Principal"] == "apigateway.amazonaws.com"


def test_every_function_resumes_from_a_snapstart_snapshot_and_is_called_only_through_it():
    """SnapStart takes its snapshot of a published version only: whatever calls $LATEST (an
    unqualified ARN) starts cold, importing everything again."""
    resources = sam_transform()["Resources"]
    lambdas = {k for k, v in resources.items() if v["Type"] == "AWS::Lambda::Function"}
    assert lambdas == set(functions(template()["Resources"]))
    for name in lambdas:
        assert resources[name]["Properties"]["SnapStart"] == {"ApplyOn": "PublishedVersions"}
    aliases = {
        v["Properties"]["FunctionName"]["Ref"]: k
        for k, v in resources.items()
        if v["Type"] == "AWS::Lambda::Alias"
    }
    assert set(aliases) == lambdas
    callers = [
        v["Properties"]["FunctionName"]
        for v in resources.values()
        if v["Type"] in ("AWS::Lambda::EventSourceMapping", "AWS::Lambda::Permission")
    ]
    assert callers and all(c["Ref"] in aliases.values() for c in callers), callers
    integrations = [
        json.dumps(spec["x-amazon-apigateway-integration"]["uri"])
        for methods in resources["AgentsApi"]["Properties"]["Body"]["paths"].values()
        for spec in methods.values()
        if "x-amazon-apigateway-integration" in spec
    ]
    assert integrations
    assert all(any(f"${{{alias}}}" in uri for alias in aliases.values()) for uri in integrations)


def test_the_web_adapter_is_one_that_takes_part_in_snapstart():
    """The Web Adapter before 1.1.0 (layer 30) takes no part in SnapStart's lifecycle: before
    1.0.0 it pooled its connections to the app, which a snapshot could hand out dead after a
    restore (the adapter's changelog), and before 1.1.0 nothing checked the app was ready
    after a restore."""
    doc = template()
    version = doc["Parameters"]["LambdaWebAdapterLayerVersion"]
    assert version["Default"] >= 30 and version["MinValue"] >= 30
    adapted = [
        props
        for props in (r["Properties"] for r in functions(doc["Resources"]).values())
        if props.get("Handler") == "run.sh"
    ]
    assert len(adapted) == 4
    for props in adapted:
        (layer,) = [str(layer) for layer in props["Layers"] if "LambdaAdapterLayer" in str(layer)]
        assert "${LambdaWebAdapterLayerVersion}" in layer
        # The port by the adapter's own name (1.x calls the bare PORT deprecated).
        variables = props["Environment"]["Variables"]
        assert "AWS_LWA_PORT" in variables and "PORT" not in variables


def test_the_stage_and_each_tenant_are_throttled_and_tenants_have_a_daily_quota():
    doc = template()
    parameters, resources = doc["Parameters"], doc["Resources"]
    (setting,) = resources["AgentsApi"]["Properties"]["MethodSettings"]
    assert setting["ResourcePath"] == "/*" and setting["HttpMethod"] == "*"
    assert setting["ThrottlingRateLimit"] == "!Ref StageRateLimit"
    assert setting["ThrottlingBurstLimit"] == "!Ref StageBurstLimit"
    plan = resources["TenantUsagePlan"]["Properties"]
    assert plan["ApiStages"] == [{"ApiId": "!Ref AgentsApi", "Stage": "!Ref StageName"}]
    assert plan["Throttle"] == {
        "RateLimit": "!Ref TenantRateLimit",
        "BurstLimit": "!Ref TenantBurstLimit",
    }
    assert plan["Quota"] == {"Limit": "!Ref TenantDailyQuota", "Period": "DAY"}
    # defaults: a tenant gets a share of the stage, not all of it
    assert parameters["TenantRateLimit"]["Default"] < parameters["StageRateLimit"]["Default"]
    assert parameters["TenantBurstLimit"]["Default"] < parameters["StageBurstLimit"]["Default"]
    assert doc["Outputs"]["UsagePlanId"]["Value"] == "!Ref TenantUsagePlan"
    # the stack makes no shared API key any more: each tenant's is made with its first key
    assert not [r for r in resources.values() if r["Type"] == "AWS::ApiGateway::ApiKey"]
    transformed = sam_transform()["Resources"]
    assert not [r for r in transformed.values() if r["Type"] == "AWS::ApiGateway::ApiKey"]
    assert "AgentsApiStage" in transformed  # what TenantUsagePlan depends on


def test_every_function_has_a_reserved_concurrency_parameter_where_0_means_unreserved():
    doc = template()
    for name, resource in functions(doc["Resources"]).items():
        reserved = resource["Properties"]["ReservedConcurrentExecutions"]
        assert reserved == {
            "!If": [f"Reserves{name}", f"!Ref {name}Concurrency", "!Ref AWS::NoValue"]
        }, name
        parameter = doc["Parameters"][f"{name}Concurrency"]
        assert parameter["Type"] == "Number" and parameter["MinValue"] == 0, name
        assert doc["Conditions"][f"Reserves{name}"] == {
            "!Not": [{"!Equals": [f"!Ref {name}Concurrency", 0]}]
        }, name
    defaults = {
        n: doc["Parameters"][f"{n}Concurrency"]["Default"] for n in functions(doc["Resources"])
    }
    # Lambda keeps 100 of an account's default 1,000 unreserved: the defaults fit in the rest.
    assert sum(defaults.values()) <= 900
    assert defaults["AuthorizerFunction"] == 0  # a cap there would refuse every caller


def test_bedrock_access_is_limited_to_the_listed_models_in_this_region_or_its_profiles():
    doc = template()
    assert doc["Parameters"]["BedrockModelIds"]["Type"] == "CommaDelimitedList"
    resources = sam_transform()["Resources"]
    callers = 0
    for name in functions(doc["Resources"]):
        role = resources[f"{name}Role"]["Properties"]
        found = [
            statement
            for policy in role.get("Policies", [])
            if "PolicyDocument" in policy  # not the conditional secret's (Fn::If)
            for statement in policy["PolicyDocument"]["Statement"]
            if any(str(a).startswith("bedrock:") for a in statement["Action"])
        ]
        if not found:
            continue
        callers += 1
        by_sid = {s["Sid"]: s for s in found}
        assert set(by_sid) == {
            "BedrockModelsInThisRegion",
            "BedrockProfilesInThisRegion",
            "BedrockModelsThroughTheProfiles",
        }, name
        region = {"aws:RequestedRegion": {"Ref": "AWS::Region"}}
        assert by_sid["BedrockModelsInThisRegion"]["Condition"] == {"StringEquals": region}
        assert by_sid["BedrockProfilesInThisRegion"]["Condition"] == {
            "StringEquals": region | {"aws:ResourceAccount": {"Ref": "AWS::AccountId"}}
        }
        through = by_sid["BedrockModelsThroughTheProfiles"]["Condition"]["StringLike"]
        assert "inference-profile/*" in through["bedrock:InferenceProfileArn"]["Fn::Sub"]
        for statement in found:
            # no `*` model: the resources are built from the parameter's ids
            resource = json.dumps(statement["Resource"])
            assert "BedrockModelIds" in resource and 'foundation-model/*"' not in resource
    assert callers == 5


def test_the_bedrock_resources_expand_to_one_arn_per_listed_model():
    """CloudFormation's Split/Join, evaluated here for the default list."""
    doc = template()
    ids = doc["Parameters"]["BedrockModelIds"]["Default"].split(",")
    role = sam_transform()["Resources"]["TurnsFunctionRole"]["Properties"]
    statement = next(
        s
        for p in role["Policies"]
        for s in p["PolicyDocument"]["Statement"]
        if s.get("Sid") == "BedrockModelsInThisRegion"
    )
    separator, joined = statement["Resource"]["Fn::Split"]
    head, inner = joined["Fn::Join"][1]
    delimiter, listed = inner["Fn::Join"]
    assert listed == {"Ref": "BedrockModelIds"}
    arns = (head + delimiter.join(ids)).split(separator)
    assert arns == [f"arn:*:bedrock:*::foundation-model/{i}" for i in ids]


def test_each_queue_takes_tls_only_and_senders_of_this_account_only():
    resources = template()["Resources"]
    policies = {
        r["Properties"]["Queues"][0]: r["Properties"]["PolicyDocument"]["Statement"]
        for r in resources.values()
        if r["Type"] == "AWS::SQS::QueuePolicy"
    }
    queues = {f"!Ref {n}" for n, r in resources.items() if r["Type"] == "AWS::SQS::Queue"}
    assert set(policies) == queues
    for queue, statements_ in policies.items():
        plain = [s for s in statements_ if "!If" not in s]
        by_sid = {s["Sid"]: s for s in plain}
        assert all(s["Effect"] == "Deny" for s in plain), queue  # IAM grants; these only limit
        assert by_sid["TlsOnly"]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        assert by_sid["TlsOnly"]["Action"] == "sqs:*"
        assert by_sid["SendersOfThisAccountOnly"]["Condition"] == {
            "StringNotEquals": {"aws:PrincipalAccount": "!Ref AWS::AccountId"}
        }
    resume = {s["Sid"]: s for s in policies["!Ref ResumeQueue"] if "!If" not in s}
    assert resume["OnlyTheConsumerReceives"]["Condition"] == {
        "ArnNotEquals": {"aws:PrincipalArn": "!GetAtt ResumeQueueFunctionRole.Arn"}
    }
    (named,) = [s["!If"] for s in policies["!Ref ResumeQueue"] if "!If" in s]
    assert named[0] == "NamesResumeSenders"
    senders = named[1]["Condition"]["ArnNotLike"]["aws:PrincipalArn"]
    assert "!Ref ResumeQueueSenderArns" in json.dumps(senders)
    assert "!GetAtt ResumeQueueFunctionRole.Arn" in json.dumps(senders)  # its continuations


def test_the_table_is_protected_from_deletion():
    table = template()["Resources"]["AgentsTable"]
    assert table["Properties"]["DeletionProtectionEnabled"] is True
    assert table["DeletionPolicy"] == "Retain" and table["UpdateReplacePolicy"] == "Retain"


# ---- Server-side tools ----


def test_outbound_tool_calls_fit_inside_the_functions_that_make_them():
    """A buffered answer is cut at 29 s: the agents function's MCP calls and shield checks are
    bounded below it; the streaming functions' below their 900 s."""
    doc = template()
    resources = doc["Resources"]
    agents = resources["AgentsFunction"]["Properties"]
    env = agents["Environment"]["Variables"]
    assert int(env["MCP_CALL_TIMEOUT_SECONDS"]) < 29 and int(env["SHIELD_TIMEOUT_SECONDS"]) < 29
    assert agents["Timeout"] >= 29  # API Gateway's cut comes first
    mcp = doc["Parameters"]["McpCallTimeoutSeconds"]
    for name in ("TurnsFunction", "ResumeFunction", "ResponsesFunction"):
        assert mcp["MaxValue"] < resources[name]["Properties"]["Timeout"], name


def test_the_web_search_key_is_a_secret_named_by_the_stack_and_readable_only_where_tools_run():
    doc = template()
    env = doc["Globals"]["Function"]["Environment"]["Variables"]
    assert env["WEB_SEARCH_API_KEY_SECRET_ID"] == "!Ref WebSearchApiKeySecretName"
    assert not any("KEY" in k and "SECRET" not in k for k in env)  # no key in the environment
    policy = doc["Resources"]["WebSearchSecretPolicy"]
    assert policy["Condition"] == "HasWebSearchApiKeySecret"
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "secretsmanager:GetSecretValue"
    assert "${WebSearchApiKeySecretName}-??????" in statement["Resource"]
    roles = {r.removeprefix("!Ref ") for r in policy["Properties"]["Roles"]}
    assert "AuthorizerFunctionRole" not in roles and "ResponsesFunctionRole" in roles


def test_spans_go_where_the_stack_says_and_only_runs_may_send_them_to_cloudwatch():
    doc = template()
    endpoint = doc["Globals"]["Function"]["Environment"]["Variables"]["OTEL_EXPORTER_OTLP_ENDPOINT"]
    assert endpoint == {
        "!If": [
            "TracesToCloudWatch",
            "!Sub https://xray.${AWS::Region}.amazonaws.com",
            "!Ref TracesEndpoint",
        ]
    }
    assert doc["Parameters"]["TracesEndpoint"]["Default"] == ""  # nowhere unless asked
    policy = doc["Resources"]["TracesPolicy"]
    assert policy["Condition"] == "TracesToCloudWatch"
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == ["xray:PutSpans", "xray:PutSpansForIndexing"]
    roles = {r.removeprefix("!Ref ") for r in policy["Properties"]["Roles"]}
    assert roles == {
        f"{name}FunctionRole"
        for name in ("Turns", "Resume", "ResumeQueue", "Responses", "Background")
    }


def test_response_events_can_go_to_a_webhook_through_an_api_destination_that_only_it_invokes():
    doc = template()
    resources = doc["Resources"]
    names = [
        "ResponseWebhookConnection",
        "ResponseWebhookDestination",
        "ResponseWebhookRole",
        "ResponseWebhookRule",
    ]
    assert all(resources[n]["Condition"] == "HasResponseWebhook" for n in names)
    connection = resources["ResponseWebhookConnection"]["Properties"]["AuthParameters"]
    key = connection["ApiKeyAuthParameters"]["ApiKeyValue"]  # resolved from a secret, by name
    assert key == "!Sub {{resolve:secretsmanager:${ResponseWebhookApiKeySecretName}}}"
    rule = resources["ResponseWebhookRule"]["Properties"]
    assert rule["EventPattern"]["detail-type"] == [
        "Response Completed",
        "Response Failed",
        "Response Incomplete",
        "Response Cancelled",
    ]
    (target,) = rule["Targets"]
    assert target["RoleArn"] == "!GetAtt ResponseWebhookRole.Arn"
    (policy,) = resources["ResponseWebhookRole"]["Properties"]["Policies"]
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert statement["Action"] == "events:InvokeApiDestination"
    assert any(s.get("Sid") == "ResponseEvents" for s in statements(resources["ResponsesFunction"]))


def test_every_function_but_the_authorizer_has_the_shared_layer():
    data = template()
    assert "Layers" not in data["Globals"]["Function"]  # SAM adds a global layer to every one
    for name, resource in functions(data["Resources"]).items():
        layers = [str(layer) for layer in resource["Properties"].get("Layers", [])]
        if name == "AuthorizerFunction":  # its own build: agents_core and PyJWT, no layer
            assert layers == [], layers
        else:
            assert "!Ref AgentsCoreLayer" in layers, name


def test_the_streamed_runs_share_one_memory_that_keeps_lambda_within_agentcores_price():
    """The turns, resume and responses functions are sized alike (bench/lambda_share.py
    --memory chose it), and Lambda's compute for 1M turns of 10 s at that size stays within
    AgentCore Runtime's 29 USD (arm64 prices as bench/cost.py has them)."""
    found = functions(template()["Resources"])
    sizes = {
        name: found[name]["Properties"]["MemorySize"]
        for name in ("TurnsFunction", "ResumeFunction", "ResponsesFunction")
    }
    assert len(set(sizes.values())) == 1, sizes
    memory_gb = sizes["TurnsFunction"] / 1024
    gb_second, per_request = 0.0000133334, 0.20 / 1e6
    assert 1e6 * (10.0 * memory_gb * gb_second + per_request) <= 29.0
