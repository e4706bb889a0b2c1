"""Stands in for Lambda's Python runtime in front of a buffered function's build output.

Run as `python -I -S artifact_runtime.py FUNCTION_DIR LAYER_DIR RUNTIME_DIR MODULE.HANDLER`:
with -I and -S nothing outside the standard library is importable, and this puts on sys.path
exactly what Lambda does (the function's folder, the layer's python/ folder as /opt/python,
the runtime's own packages such as boto3). It imports the handler (the function's init), says
`{"ready": true}`, then answers each event read from stdin (one JSON per line) with the
handler's result (one JSON per line), or, when it raises, the error document Lambda returns. The function's own output (logs, metrics) goes to stderr,
so stdout carries only the results.
"""

import importlib
import json
import os
import sys
import uuid


class LambdaContext:
    """The context attributes handlers and Powertools read."""

    def __init__(self, function_name: str) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 512
        self.invoked_function_arn = (
            f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}"
        )
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "artifact-test"

    def get_remaining_time_in_millis(self) -> int:
        return 15_000


def main() -> None:
    function_dir, layer_dir, runtime_dir, handler_name = sys.argv[1:5]
    results = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.path[:0] = [function_dir, layer_dir, runtime_dir]
    module_name, attribute = handler_name.rsplit(".", 1)
    handler = getattr(importlib.import_module(module_name), attribute)
    function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "function")

    def answer(message: dict) -> None:
        results.write(json.dumps(message) + "\n")
        results.flush()

    answer({"ready": True})
    for line in sys.stdin:
        try:
            answer(handler(json.loads(line), LambdaContext(function_name)))
        except Exception as err:  # what Lambda returns for a raised error (API Gateway reads it)
            answer({"errorMessage": str(err), "errorType": type(err).__name__})


if __name__ == "__main__":
    main()
