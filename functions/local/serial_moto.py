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

Taken one at a time, a transaction needs no copy of the tables to roll back, and moto's copy
(of every table it touches, once per action) made each TransactWriteItems cost time in
proportion to the table: 9 ms on a small table, 14 ms after a hundred turns. So this server
runs them as DynamoDB describes them: every condition is judged against the items as they were
before the transaction, and the writes are made only if all hold; were a write to fail, the
items written before it are put back (`_transact_write_items`).

    python functions/local/serial_moto.py -p 5000     # as `moto_server -p 5000`, in a process
"""

from __future__ import annotations

import argparse
import contextlib
import threading
from collections.abc import Callable, Iterable
from typing import Any

#: The header AWS's JSON protocol (DynamoDB, EventBridge, SQS) names its operation in.
_TARGET = "HTTP_X_AMZ_TARGET"
_DYNAMODB_PREFIX = "DynamoDB_"


#: Set in the thread serving a DynamoDB request under the lock: only there are transactions run
#: without moto's table copies (another moto in the same process keeps moto's own way).
_serial = threading.local()


class AppPerService:
    """WSGI middleware before moto's dispatcher: a JSON-protocol request (X-Amz-Target names its
    service) goes straight to its service's app, found once. moto's dispatcher finds it anew
    for every request, listing the folders of its own package to match the service's name:
    about a millisecond of each request, which AWS does not spend."""

    def __init__(self, dispatcher: Any) -> None:
        self.dispatcher = dispatcher
        self.apps: dict[str, Callable[..., Iterable[bytes]]] = {}

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        service = environ.get(_TARGET, "").partition(".")[0]
        if not service:
            return self.dispatcher(environ, start_response)
        app = self.apps.get(service)
        if app is None:
            app = self.apps.setdefault(service, self.dispatcher.get_application(environ))
        return app(environ, start_response)


class OneDynamoDBRequestAtATime:
    """WSGI middleware: a DynamoDB request holds a lock from its start until its body is read."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.Lock()
        _install_transactions()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if not environ.get(_TARGET, "").startswith(_DYNAMODB_PREFIX):
            return self.app(environ, start_response)
        with self.lock:
            _serial.active = True
            try:
                body = self.app(environ, start_response)
                try:
                    return [b"".join(body)]
                finally:
                    close = getattr(body, "close", None)
                    if close is not None:
                        close()
            finally:
                _serial.active = False


def _install_transactions() -> None:
    """DynamoDBBackend.transact_write_items, in a thread of this server, as
    `_transact_write_items`; moto's own elsewhere. Installed once per process."""
    from moto.dynamodb.models import DynamoDBBackend

    own = DynamoDBBackend.transact_write_items
    if getattr(own, "serial", False):
        return

    def transact_write_items(backend: Any, transact_items: list[dict[str, Any]]) -> None:
        if getattr(_serial, "active", False):
            return _transact_write_items(backend, transact_items)
        return own(backend, transact_items)

    transact_write_items.serial = True  # type: ignore[attr-defined]
    DynamoDBBackend.transact_write_items = transact_write_items


def _transact_write_items(backend: Any, transact_items: list[dict[str, Any]]) -> None:
    """A TransactWriteItems against items nobody else changes meanwhile (the lock): conditions
    first, against the items as they are; then the writes, undone item by item if one fails."""
    import copy

    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import (
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )

    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    targets: set[tuple[str, str]] = set()
    actions: list[tuple[str, dict[str, Any], dict[str, Any], Any]] = []
    reasons: list[tuple[Any, Any, Any]] = []
    for entry in transact_items:
        if len(entry) > 1:
            raise TransactWriteSingleOpException
        kind, op = next(iter(entry.items()))
        if kind not in ("ConditionCheck", "Put", "Delete", "Update"):
            raise ValueError("Unsupported transaction operation")
        table = backend.get_table(op["TableName"])
        if kind == "Put":
            key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
            if table.range_key_attr is not None:
                key[table.range_key_attr] = op["Item"][table.range_key_attr]
        else:
            key = op["Key"]
        target = (op["TableName"], str(sorted(key.items())))
        if target in targets:
            raise MultipleTransactionsException()
        targets.add(target)
        current = backend.get_item(op["TableName"], key)
        reason: tuple[Any, Any, Any] = (None, None, None)
        condition = op.get("ConditionExpression")
        if condition is not None:
            judged = get_filter_expression(
                condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
            )
            if not judged.expr(current):
                old = None
                if current and op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD":
                    old = current.to_json()["Attributes"]
                reason = ("ConditionalCheckFailed", "The conditional request failed", old)
        reasons.append(reason)
        actions.append((kind, op, key, current))
    if any(code is not None for code, _, _ in reasons):
        raise TransactionCanceledException(reasons)

    written: list[tuple[str, dict[str, Any], Any]] = []
    try:
        for kind, op, key, current in actions:
            name = op["TableName"]
            if kind == "ConditionCheck":
                continue
            before = copy.deepcopy(current)
            if kind == "Put":
                backend.put_item(name, op["Item"])
            elif kind == "Delete":
                backend.delete_item(name, key)
            else:
                backend.update_item(
                    name,
                    key,
                    update_expression=op["UpdateExpression"],
                    expression_attribute_names=op.get("ExpressionAttributeNames"),
                    expression_attribute_values=op.get("ExpressionAttributeValues"),
                )
            written.append((name, key, before))
    except Exception:
        for name, key, before in reversed(written):
            if before is None:
                backend.delete_item(name, key)
            else:
                backend.put_item(name, before.to_json()["Attributes"])
        raise


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


#: Set in a request's thread once its answer keeps the connection open.
_kept = threading.local()


class _DrainingOnlyClosed:
    """`selectors` as werkzeug's server sees it. After each answer werkzeug reads whatever the
    client sent next and drops it (unread body, it assumes; the connection closes anyway): on a
    kept connection that is the next request. A kept connection's drain finds nothing."""

    EVENT_READ = 1  # selectors.EVENT_READ, which werkzeug's drain of a closing connection names

    class _Nothing:
        def register(self, *_: Any) -> None:
            pass

        def select(self, timeout: float | None = None) -> list[Any]:
            return []

        def close(self) -> None:
            pass

    @classmethod
    def DefaultSelector(cls) -> Any:  # noqa: N802 - the name werkzeug calls
        import selectors

        return cls._Nothing() if getattr(_kept, "active", False) else selectors.DefaultSelector()


def _make_server(host: str, port: int) -> Any:
    import werkzeug.serving
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    class KeptAlive(MotoRequestHandler):
        """A JSON-protocol request's connection (DynamoDB, EventBridge, SQS: X-Amz-Target)
        stays open for the next, as AWS keeps it. werkzeug closes every connection, since it
        cannot tell whether an application read its request's body; these bodies are JSON that
        moto reads whole. Without it each DynamoDB call paid a new connection locally, which
        no client pays against DynamoDB, and every CPU figure taken here carried it."""

        disable_nagle_algorithm = True  # the answer's head and body go out in separate writes

        def handle_one_request(self) -> None:
            _kept.active = False
            super().handle_one_request()

        def send_header(self, keyword: str, value: str) -> None:
            if (
                keyword.lower() == "connection"
                and value.lower() == "close"
                and self.headers.get("X-Amz-Target")
                and self.headers.get("Content-Length")
            ):
                _kept.active = True
                return
            super().send_header(keyword, value)

    werkzeug.serving.selectors = _DrainingOnlyClosed  # type: ignore[assignment]
    app = OneDynamoDBRequestAtATime(AppPerService(DomainDispatcherApplication(create_backend_app)))
    return make_server(host, port, app, threaded=True, request_handler=KeptAlive)


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
