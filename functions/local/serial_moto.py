"""moto's server, with DynamoDB's requests taken one at a time: the AWS that `make run`, the
tests and the benchmarks stand up locally.

Why: moto 5.2.5 applies a TransactWriteItems by changing the live table and, when a condition
fails, putting back a deep copy taken before it began (`moto/dynamodb/models/__init__.py`,
`transact_write_items`). Against concurrent requests that is not DynamoDB's semantics: another
request's write made in between is lost with the rollback, and a reader sees the transaction's
first actions, or a table being swapped. Racing resumes of one turn then stored two tool steps,
let two racers win, or answered 404 for a session that exists (tests/test_moto_faithfulness.py
shows it on moto alone). DynamoDB applies each request atomically and in some order; taking its
requests one at a time gives moto exactly that. Other services' requests (SQS long polls among
them) go through as moto serves them.

    python functions/local/serial_moto.py -p 5000     # as `moto_server -p 5000`, in a process
"""

from __future__ import annotations

import argparse
import contextlib
import threading
from collections.abc import Callable, Iterable
from typing import Any

#: The header DynamoDB's JSON protocol names its operation in.
_DYNAMODB_TARGET = "HTTP_X_AMZ_TARGET"
_DYNAMODB_PREFIX = "DynamoDB_"


class OneDynamoDBRequestAtATime:
    """WSGI middleware: a DynamoDB request holds a lock from its start until its body is read."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if not environ.get(_DYNAMODB_TARGET, "").startswith(_DYNAMODB_PREFIX):
            return self.app(environ, start_response)
        with self.lock:
            body = self.app(environ, start_response)
            try:
                return [b"".join(body)]
            finally:
                close = getattr(body, "close", None)
                if close is not None:
                    close()


class SerialMotoServer:
    """moto's threaded server with DynamoDB serialized, on 127.0.0.1 (port 0: any free one).

    server = SerialMotoServer(); server.start(); ...; server.stop()"""

    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        self.host, self.port = host, port
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> str:
        """Listen and serve in a daemon thread; the endpoint URL."""
        self._server = _make_server(self.host, self.port)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self.endpoint

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)


def _make_server(host: str, port: int) -> Any:
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    app = OneDynamoDBRequestAtATime(DomainDispatcherApplication(create_backend_app))
    return make_server(host, port, app, threaded=True, request_handler=MotoRequestHandler)


def main() -> None:
    import logging

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=5000)
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    server = _make_server(args.host, args.port)
    print(f"http://{args.host}:{server.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
