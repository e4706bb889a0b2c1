"""What a shield check costs: per provider, the latency `SafetyService.check` adds and the
requests it makes (to the provider, and to DynamoDB for the shield), cold (a container's first
check of the shield) and warm.

The peers run in processes of their own, as AWS and a model server would: moto (DynamoDB), the
ApplyGuardrail emulator (tests/peers/guardrail_emulator.py) and the scripted OpenAI-compatible
model, whose answers to Llama Guard's prompt are queued as `safe`. The peers answer at once, so
the figures are this service's own cost; on AWS add the guardrail's or the model's time. A turn
runs a check on its input and one on each model answer, so a one-answer turn with an input and
an output shield pays two checks.

    .venv/bin/python bench/shields.py [--checks 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from collections import Counter

from peers import ROOT, moto_and_model

sys.path.insert(0, str(ROOT / "layers" / "agents_core"))


def start_guardrails() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.peers.guardrail_emulator"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    return proc, proc.stdout.readline().strip()


def queue_safe(model_url: str, n: int) -> None:
    """Queue `n` replies `safe` at the model server (it runs in another process)."""
    for _ in range(n):
        request = urllib.request.Request(
            f"{model_url}/_replies",
            data=json.dumps({"text": "safe", "chunks": 1}).encode(),
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=5).close()


class Calls:
    """Requests a boto3 client makes, by operation."""

    def __init__(self, client, service: str) -> None:
        self.count: Counter[str] = Counter()
        client.meta.events.register(f"before-call.{service}", self._before)

    def _before(self, model, **_):
        self.count[model.name] += 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checks", type=int, default=200)
    args = parser.parse_args()
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(name, "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

    import boto3
    from agents_core.api.safety import RegisterShieldRequest
    from agents_core.services import Services
    from agents_core.settings import Settings
    from agents_core.store.schema import create_table_if_missing

    guardrails_proc, guardrails_url = start_guardrails()
    try:
        with moto_and_model() as (aws_endpoint, model_url):
            dynamodb = boto3.client("dynamodb", endpoint_url=aws_endpoint)
            create_table_if_missing(dynamodb, "bench-shields")
            bedrock = boto3.client("bedrock-runtime", endpoint_url=guardrails_url)
            services = Services(
                settings=Settings(table_name="bench-shields", openai_base_url=model_url),
                dynamodb=dynamodb,
                bedrock_client=bedrock,
            )
            safety = services.safety
            safety.register(
                "bench",
                RegisterShieldRequest(
                    shield_id="guard",
                    provider_id="bedrock",
                    provider_shield_id="grbench",
                    params={"guardrailVersion": "1"},
                ),
            )
            safety.register(
                "bench", RegisterShieldRequest(shield_id="lg", provider_id="llama-guard")
            )
            safety.register(
                "bench",
                RegisterShieldRequest(
                    shield_id="patterns", provider_id="offline", params={"patterns": ["secret"]}
                ),
            )
            ddb_calls, bedrock_calls = (
                Calls(dynamodb, "dynamodb"),
                Calls(bedrock, "bedrock-runtime"),
            )
            messages = [{"role": "user", "content": "What is the capital of France?"}]
            print(f"{args.checks} checks per shield; one user message; peers on loopback\n")
            print(
                f"{'shield (provider)':34} {'cold ms':>8} {'p50 ms':>8} {'p95 ms':>8}  requests per warm check"
            )
            for shield_id, provider in (
                ("offline", "offline, built in"),
                ("patterns", "offline, registered"),
                ("guard", "bedrock"),
                ("lg", "llama-guard"),
            ):
                if provider == "llama-guard":
                    queue_safe(model_url, args.checks + 1)
                ddb_calls.count.clear()
                cold = asyncio.run(_timed(safety, shield_id, messages, 1))[0]
                cold_ddb = sum(ddb_calls.count.values())
                ddb_calls.count.clear()
                bedrock_calls.count.clear()
                model_before = _model_requests(model_url)
                warm = asyncio.run(_timed(safety, shield_id, messages, args.checks))
                requests = {
                    "DynamoDB": sum(ddb_calls.count.values()) / args.checks,
                    "ApplyGuardrail": bedrock_calls.count["ApplyGuardrail"] / args.checks,
                    "model": (_model_requests(model_url) - model_before) / args.checks,
                }
                shown = ", ".join(f"{k} {v:g}" for k, v in requests.items() if v)
                print(
                    f"{shield_id + ' (' + provider + ')':34} {cold:8.2f} "
                    f"{statistics.median(warm):8.2f} {_p95(warm):8.2f}  {shown or 'none'}"
                    f" (cold: DynamoDB {cold_ddb})"
                )
    finally:
        guardrails_proc.terminate()


async def _timed(safety, shield_id: str, messages: list, n: int) -> list[float]:
    """Milliseconds of each of `n` checks, one after another."""
    times = []
    for _ in range(n):
        start = time.perf_counter()
        violation = await safety.check("bench", [shield_id], messages, source="input")
        times.append((time.perf_counter() - start) * 1000)
        assert violation is None
    return times


def _model_requests(model_url: str) -> int:
    with urllib.request.urlopen(f"{model_url}/_journal", timeout=5) as resp:
        return len(json.loads(resp.read())["arrivals"])


def _p95(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.95) - 1]


if __name__ == "__main__":
    main()
