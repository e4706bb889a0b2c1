"""template.yaml: cfn-lint clean, and the table it declares is the one the code creates locally."""

from __future__ import annotations

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


def table_actions(function: str) -> set[str]:
    """The DynamoDB actions a function's policy in template.yaml allows on the table."""
    statements = [
        statement
        for policy in template()["Resources"][function]["Properties"]["Policies"]
        for statement in policy.get("Statement", [])
    ]
    return {
        action
        for statement in statements
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
    resources = template()["Resources"]
    for name, resource in resources.items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        for policy in resource["Properties"]["Policies"]:
            for statement in policy["Statement"]:
                actions = statement["Action"]
                dynamo = [a for a in actions if a.startswith("dynamodb:")]
                assert "dynamodb:*" not in actions and "dynamodb:Scan" not in dynamo, name
                if dynamo:
                    assert statement["Resource"] == [
                        "!GetAtt AgentsTable.Arn",
                        "!Sub ${AgentsTable.Arn}/index/*",
                    ], name


def test_queue_dlq_bus_and_the_resume_event_source():
    resources = template()["Resources"]
    queue = resources["ResumeQueue"]["Properties"]
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == "!GetAtt ResumeDeadLetterQueue.Arn"
    assert resources["TurnEventBus"]["Type"] == "AWS::Events::EventBus"
    resume = resources["ResumeFunction"]["Properties"]
    source = resume["Events"]["ResumeQueueMessages"]
    assert source["Type"] == "SQS" and source["Properties"]["FunctionResponseTypes"] == [
        "ReportBatchItemFailures"
    ]
    # Visibility covers the consumer's timeout with room for retries.
    assert queue["VisibilityTimeout"] >= 6 * resume["Timeout"]
    for name in ("TurnsFunction", "ResumeFunction"):
        statements = resources[name]["Properties"]["Policies"][0]["Statement"]
        puts = [s for s in statements if s["Action"] == "events:PutEvents"]
        assert puts and puts[0]["Resource"] == "!GetAtt TurnEventBus.Arn", name
