"""Operational counts as CloudWatch embedded metric format lines (Powertools), namespace
`serverless-agents`: turn and response outcomes, and what the resume queue did with messages.

Emitted after the caller has its answer; the Powertools metrics module is imported then, not
during a cold start. `POWERTOOLS_METRICS_DISABLED=true` turns them off (the benchmarks do).
"""

from __future__ import annotations

NAMESPACE = "serverless-agents"


def count(name: str) -> None:
    from aws_lambda_powertools.metrics import MetricUnit, single_metric
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled

    if is_metrics_disabled():  # POWERTOOLS_METRICS_DISABLED, which `single_metric` ignores
        return
    with single_metric(name=name, unit=MetricUnit.Count, value=1, namespace=NAMESPACE) as metric:
        metric.add_dimension(name="service", value=NAMESPACE)
