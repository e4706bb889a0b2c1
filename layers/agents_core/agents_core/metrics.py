"""Operational counts as CloudWatch embedded metric format lines, namespace `serverless-agents`:
turn and response outcomes, and what the resume queue did with messages.

Each count is one line on stdout, the line Powertools' `single_metric` prints for it (a test
holds the two equal), written directly: Powertools made and validated a metric set for it, about
90 us of CPU a turn here, some 0.8 ms at 192 MB's share. Its switches hold:
`POWERTOOLS_METRICS_DISABLED=true` turns them off (`make run` does), and so does
`POWERTOOLS_DEV=true` unless POWERTOOLS_METRICS_DISABLED says otherwise.
"""

from __future__ import annotations

import os
import sys
import time

NAMESPACE = "serverless-agents"
#: The one dimension of every count, as Powertools names a service's.
_DIMENSION = "service"
_TRUE = frozenset({"1", "y", "yes", "t", "true", "on"})  # Powertools' strtobool


def count(name: str) -> None:
    """One of `name` (a literal of this package's, such as "TurnsCompleted")."""
    if _disabled():
        return
    timestamp = time.time_ns() // 1_000_000
    sys.stdout.write(
        f'{{"_aws":{{"Timestamp":{timestamp},"CloudWatchMetrics":[{{"Namespace":"{NAMESPACE}",'
        f'"Dimensions":[["{_DIMENSION}"]],"Metrics":[{{"Name":"{name}","Unit":"Count"}}]}}]}},'
        f'"{_DIMENSION}":"{NAMESPACE}","{name}":[1.0]}}\n'
    )


def _disabled() -> bool:
    """Powertools' `is_metrics_disabled`, read at each count (a test sets the switch)."""
    disabled = os.environ.get("POWERTOOLS_METRICS_DISABLED")
    if disabled is not None:
        return disabled.lower() in _TRUE
    return os.environ.get("POWERTOOLS_DEV", "false").lower() in _TRUE
