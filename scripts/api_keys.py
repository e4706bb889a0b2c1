"""Create, list and revoke callers' Bearer keys (agents_core.auth) in the stack's table.

    python scripts/api_keys.py --stack my-agents create acme --name ci   # prints the key once
    python scripts/api_keys.py --stack my-agents list acme
    python scripts/api_keys.py --stack my-agents revoke acme 3f2a9c0d1b7e
    python scripts/api_keys.py --stack my-agents attach acme   # into a new stack's usage plan
    python scripts/api_keys.py --local create acme        # the server of LOCAL_AUTH=keys make run

Where the keys go: `--stack` reads the table and the usage plan from the stack's outputs
(TableName, UsagePlanId); `--table` (and `--usage-plan-id`) name them directly; `--local [PORT]`
asks the running local server for its AWS endpoint and table. AWS credentials and region are
boto3's usual ones (AWS_PROFILE, AWS_REGION...). Each answer is one JSON document on stdout.

A tenant's first key behind a usage plan also creates the tenant's API Gateway API key in that
plan (named `<plan id>/<tenant>`); the authorizer hands its value to API Gateway with every
request of the tenant (key source AUTHORIZER), so the plan's throttling and quota count per
tenant. Callers never see or send it. A stack deployed again over the kept table has a new plan:
`attach` puts a tenant's existing keys into it (until then API Gateway answers them 403).
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "layers" / "agents_core"))

from agents_core.auth.store import KeyRecord, KeyStore, check_tenant  # noqa: E402
from agents_core.errors import InvalidRequest, ServiceError  # noqa: E402


def _client(service: str, **kwargs: Any) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(connect_timeout=5, read_timeout=15, retries={"total_max_attempts": 3})
    return boto3.client(service, config=config, **kwargs)


def _local(port: int) -> tuple[dict[str, Any], str]:
    """The AWS endpoint and table of the local server on this port."""
    import httpx

    try:
        aws = httpx.get(f"http://127.0.0.1:{port}/local/aws", timeout=5).json()
    except (httpx.HTTPError, ValueError) as err:
        message = f"no local server on port {port} ({err}): start it with make run"
        raise SystemExit(message) from None
    client_args = {
        "endpoint_url": aws["endpoint_url"],
        "region_name": aws["region"],
        "aws_access_key_id": "local",
        "aws_secret_access_key": "local",
    }
    return client_args, aws["table_name"]


def _stack_outputs(stack: str) -> dict[str, str]:
    stacks = _client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
    return {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}


def tenant_usage_key(store: KeyStore, apigateway: Any, tenant: str, plan_id: str) -> str:
    """The tenant's API key value in the usage plan: made (and saved) with its first key, or
    when the plan is another one than before (then the tenant's keys move to it)."""
    saved = store.usage_key(tenant)
    if saved and saved["usage_plan_id"] == plan_id:
        return saved["usage_key"]
    created = apigateway.create_api_key(
        name=f"{plan_id}/{tenant}",
        description=f"serverless-agents usage of tenant {tenant} (sent by the authorizer)",
        enabled=True,
        value=secrets.token_urlsafe(30),
    )
    apigateway.create_usage_plan_key(usagePlanId=plan_id, keyId=created["id"], keyType="API_KEY")
    store.save_usage_key(tenant, created["id"], created["value"], plan_id)
    store.set_usage_key(tenant, created["value"])
    return created["value"]


def _shown(record: KeyRecord) -> dict[str, Any]:
    shown = asdict(record)
    shown.pop("usage_key")  # an identifier for API Gateway, of no use to anyone else
    shown["key_prefix"] = record.display
    shown["status"] = "revoked" if record.revoked_at else "active"
    return shown


def run(args: argparse.Namespace, dynamodb: Any, table: str, apigateway: Any = None) -> Any:
    """The command's answer (a JSON-able value)."""
    store = KeyStore(dynamodb, table)
    if args.command == "create":
        check_tenant(args.tenant)
        usage_key = None
        if args.usage_plan_id:
            usage_key = tenant_usage_key(store, apigateway, args.tenant, args.usage_plan_id)
        issued = store.create(args.tenant, name=args.name, usage_key=usage_key)
        return {"key": issued.key, **_shown(issued.record)}
    if args.command == "attach":
        if not args.usage_plan_id:
            raise InvalidRequest("attach needs the usage plan: --stack, or --usage-plan-id")
        tenant_usage_key(store, apigateway, check_tenant(args.tenant), args.usage_plan_id)
        return [_shown(record) for record in store.list(args.tenant)]
    if args.command == "list":
        return [_shown(record) for record in store.list(args.tenant)]
    return _shown(store.revoke(args.tenant, args.key_id))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--stack", help="a deployed stack: table and usage plan from its outputs")
    where.add_argument("--table", help="the table's name (with --usage-plan-id for a stack's API)")
    where.add_argument(
        "--local", nargs="?", const=8321, type=int, metavar="PORT", help="the local server"
    )
    p.add_argument("--usage-plan-id", help="the API's usage plan (template output UsagePlanId)")
    commands = p.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", help="issue a key to a tenant (printed once)")
    create.add_argument("tenant")
    create.add_argument("--name", default="", help="a label shown in listings")
    commands.add_parser("list", help="a tenant's keys (ids and status, never keys)").add_argument(
        "tenant"
    )
    commands.add_parser(
        "attach", help="put a tenant's keys in the usage plan (after a new deploy)"
    ).add_argument("tenant")
    revoke = commands.add_parser("revoke", help="revoke one key of a tenant by its key id")
    revoke.add_argument("tenant")
    revoke.add_argument("key_id")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    client_args: dict[str, Any] = {}
    if args.local is not None:
        client_args, table = _local(args.local)
    elif args.stack:
        outputs = _stack_outputs(args.stack)
        table = outputs["TableName"]
        args.usage_plan_id = args.usage_plan_id or outputs.get("UsagePlanId")
    else:
        table = args.table
    apigateway = _client("apigateway", **client_args) if args.usage_plan_id else None
    try:
        answer = run(args, _client("dynamodb", **client_args), table, apigateway)
    except ServiceError as err:
        print(f"api_keys: {err}", file=sys.stderr)
        return 2
    print(json.dumps(answer, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
