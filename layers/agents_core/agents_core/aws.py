"""AWS clients for every function: one botocore session, bounded timeouts, a quick data loader.

boto3 honours AWS_ENDPOINT_URL, so local runs against moto need no special case here.
"""

from __future__ import annotations

from functools import cache
from typing import Any

#: The services this application calls.
SERVICES = ("dynamodb", "sqs", "events", "bedrock-runtime", "secretsmanager", "s3vectors", "s3")


@cache
def _session():
    import json
    import os

    import boto3
    import botocore.session
    from botocore.loaders import JSONFileLoader, Loader

    class KnownServicesLoader(Loader):
        """botocore checks a service name by reading the data directory of every AWS service
        (about 900 directory listings, some 40 ms of a cold start); ours are known."""

        def list_available_services(self, type_name: str) -> list[str]:
            return list(SERVICES)

    class PlainJSONFileLoader(JSONFileLoader):
        """botocore parses its data files into OrderedDicts, a habit from Python 2 that makes
        parsing 2.5x slower (some 10 ms of a cold start, for endpoints.json and a service
        model); plain dicts keep their order."""

        def _load_file(self, full_path, open_method):
            if not os.path.isfile(full_path):
                return None
            with open_method(full_path, "rb") as fp:
                return json.loads(fp.read())

    core = botocore.session.get_session()
    core.register_component("data_loader", KnownServicesLoader(file_loader=PlainJSONFileLoader()))
    return boto3.Session(botocore_session=core)


def client(service: str, *, read_timeout: float = 5, attempts: int = 4) -> Any:
    """A client whose calls fail fast (bounded connect/read timeouts) instead of eating a Lambda."""
    from botocore.config import Config

    config = Config(
        connect_timeout=2,
        read_timeout=read_timeout,
        retries={"mode": "standard", "total_max_attempts": attempts},
        tcp_keepalive=True,
    )
    return _session().client(service, config=config)
