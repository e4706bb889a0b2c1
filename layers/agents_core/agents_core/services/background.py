"""Background responses (`background: true`): queued by the create call, run by a worker.

The create call builds the run as a foreground one would (every 400 before anything is stored),
stores the response `queued` with the run's first state and a token, and sends a message to the
background queue: `{"response_id", "token", "credentials"}` with the tenant as the message
attribute `tenant`. The credentials are the MCP servers' `headers` and `authorization` by
label: they travel in the (encrypted) message, never in the table.

The worker (`BackgroundWorker.handle`, an SQS batch as Lambda hands it, polled in-process by
`make run`) takes the run for the rest of its invocation, rebuilds it from its last state and
runs it, recording its stream events for followers:

- a message whose token is not its response's is rejected (acknowledged, nothing changed): a
  sender cannot name a tenant or a response it was not told about;
- a message for a run that ended (or was cancelled while queued) is acknowledged: duplicates
  and redeliveries are harmless;
- a run held by a live invocation is reported failed, so SQS redelivers it later; one whose
  invocation died (its lease passed) is taken over from its last state: no completed model
  call or recorded tool result runs again;
- when its invocation runs short of time the run stops at a step boundary, stores its state,
  frees its lease and sends itself a continuation message.

    worker = BackgroundWorker(services)
    result = await worker.handle(sqs_event, deadline=time.time() + remaining)
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from .. import metrics
from ..api.responses import (
    CreateOpenaiResponseRequest,
    OpenAIResponseInputToolMCP,
    OpenAIResponseObject,
    OpenAIResponseObjectWithInput,
)
from ..domain import ConversationAppend
from ..errors import Conflict, Unavailable
from ..ids import new_id
from ..log import logger
from ..store.responses import CancelledMeanwhile, RunBusy, RunGone
from . import Services

TENANT_ATTRIBUTE = "tenant"


class BackgroundRuns:
    """The create side: queue a background response."""

    def __init__(self, services: Services) -> None:
        self.services = services

    async def submit(self, tenant: str, body: CreateOpenaiResponseRequest) -> OpenAIResponseObject:
        run = await self.services.responses_engine.start(tenant, body)
        run.response.status = "queued"
        token = secrets.token_urlsafe(24)
        store = self.services.responses
        await asyncio.to_thread(store.queue, tenant, run.response, run.state(), token)
        message = {"response_id": run.response.id, "token": token, "credentials": _secrets(body)}
        try:
            await asyncio.to_thread(self.send, tenant, message)
        except Exception as err:
            logger.exception("background response not queued", extra={"id": run.response.id})
            await asyncio.to_thread(store.cancel_unsent, tenant, run.response.id)
            raise Unavailable("The background queue is unavailable; nothing was queued") from err
        metrics.count("ResponsesQueued")
        return OpenAIResponseObject.model_validate(run.response.model_dump(exclude={"input"}))

    def send(self, tenant: str, message: dict[str, Any]) -> None:
        settings = self.services.settings
        self.services.sqs.send_message(
            QueueUrl=self.services.queue_url(
                settings.background_queue_url, settings.background_queue_name
            ),
            MessageBody=json.dumps(message),
            MessageAttributes={TENANT_ATTRIBUTE: {"DataType": "String", "StringValue": tenant}},
        )


class BackgroundWorker:
    def __init__(self, services: Services) -> None:
        self.services = services

    async def handle(self, event: dict[str, Any], deadline: float | None = None) -> dict[str, Any]:
        """Process an SQS event (records one after another, each until `deadline`, the
        invocation's end as epoch seconds; locally `QUEUE_INVOCATION_SECONDS` from now)."""
        if deadline is None:
            deadline = time.time() + self.services.settings.queue_invocation_seconds
        loop = asyncio.get_running_loop()

        def record_handler(record: SQSRecord) -> None:
            asyncio.run_coroutine_threadsafe(self._logged(record, deadline), loop).result()

        return await asyncio.to_thread(
            process_partial_response,
            event=event,
            record_handler=record_handler,
            processor=BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False),
        )

    async def _logged(self, record: SQSRecord, deadline: float) -> None:
        try:
            await self._run(record, deadline)
        except RunBusy:
            raise
        except Exception:  # reported failed: SQS retries it, then the DLQ has it
            logger.exception("background message failed", extra={"id": record.message_id})
            raise

    async def _run(self, record: SQSRecord, deadline: float) -> None:
        try:
            message = json.loads(record.body)
            response_id, token = str(message["response_id"]), str(message["token"])
            credentials = dict(message.get("credentials") or {})
        except (ValueError, KeyError, TypeError):
            logger.warning("background message rejected: not a background message")
            metrics.count("BackgroundMessagesRejected")
            return
        attributes = record.message_attributes
        tenant = None
        if TENANT_ATTRIBUTE in attributes:
            tenant = attributes[TENANT_ATTRIBUTE].string_value
        log = {"message_id": record.message_id, "tenant": tenant, "response_id": response_id}
        store = self.services.responses
        found = await asyncio.to_thread(store.run, tenant, response_id) if tenant else None
        if found is None or not secrets.compare_digest(found.token, token):
            # A run that ended leaves no record, and neither does a wrong tenant or response:
            # both are acknowledged; only a matching token is ever acted on.
            logger.info("background message acknowledged: no such run", extra=log)
            metrics.count("BackgroundMessagesDropped")
            return
        owner = f"{new_id()}"
        try:
            await asyncio.to_thread(
                store.take, tenant, response_id, token, owner, deadline, found.status
            )
        except RunBusy:
            logger.info("background run busy elsewhere; retried later", extra=log)
            raise
        state = found.state
        assert state is not None
        control = StoredRunControl(self.services, tenant, response_id, owner, deadline)
        if found.status == "cancelled":
            control.cancel_seen()  # cancelled while it ran, then its invocation died: end it
        engine = self.services.responses_engine
        try:
            run = await engine.restore(
                tenant,
                state,
                credentials,
                control,
                run_seconds=max(1.0, deadline - time.time() - 5),
            )
        except Exception as err:  # e.g. a shield it names was deleted: it can never run
            logger.warning("background run cannot go on", extra={**log, "reason": str(err)})
            await asyncio.to_thread(self._fail, tenant, state, owner, err)
            return
        streams = self.services.streams
        from .streams import ResponseFrames, StreamKey

        key = StreamKey.response(response_id)
        last = await streams.last_sequence(tenant, key)
        run.output.number_after(last)
        recorder = streams.recorder(tenant, key)
        frame = ResponseFrames()
        try:
            async for event in run.events(plain_text=True):
                recorder.add(frame(event))
        finally:
            await recorder.close(final=not run.suspended and not control.lost)
        if control.lost:
            return
        if run.suspended:
            await asyncio.to_thread(store.release, tenant, response_id, owner)
            await asyncio.to_thread(BackgroundRuns(self.services).send, tenant, message)
            logger.info("background run continues in a new invocation", extra=log)
            metrics.count("BackgroundRunsContinued")
            return
        logger.info("background run ended", extra={**log, "status": run.response.status})

    def _fail(self, tenant: str, state: dict[str, Any], owner: str, err: Exception) -> None:
        from ..api.responses import OpenAIResponseError

        response = OpenAIResponseObjectWithInput.model_validate(state["response"])
        response.status = "failed"
        response.error = OpenAIResponseError(code="server_error", message=str(err)[:1000])
        response.completed_at = None
        self.services.responses.save(tenant, response, [], owner)


class StoredRunControl:
    """The RunControl of a background run in this invocation, on the response store."""

    def __init__(
        self, services: Services, tenant: str, response_id: str, owner: str, deadline: float
    ) -> None:
        self.store = services.responses
        self.conversations = services.conversation_store
        self.settings = services.settings
        self.tenant, self.response_id, self.owner = tenant, response_id, owner
        self.deadline = deadline
        self.version = 0
        self.lost = False
        self._cancelled = False
        self._looked = 0.0

    def should_suspend(self) -> bool:
        return self.deadline - time.time() < self.settings.run_suspend_margin_seconds

    def cancel_seen(self) -> None:
        self._cancelled = True

    async def cancelled(self) -> bool:
        if self._cancelled:
            return True
        now = time.monotonic()
        if now - self._looked < self.settings.background_cancel_poll_seconds:
            return False
        self._looked = now
        status = await asyncio.to_thread(self.store.status, self.tenant, self.response_id)
        self._cancelled = status == "cancelled"
        return self._cancelled

    async def checkpoint(self, state: dict[str, Any]) -> None:
        from ..engine.responses import RunCancelled, RunLost

        self.version += 1
        try:
            await asyncio.to_thread(
                self.store.checkpoint,
                self.tenant,
                self.response_id,
                self.owner,
                self.version,
                state,
            )
        except RunGone as err:
            self.lost = True
            raise RunLost(self.response_id) from err
        self._looked = 0.0  # a step boundary: look now
        if await self.cancelled():
            raise RunCancelled(self.response_id)

    async def save(
        self,
        response: OpenAIResponseObjectWithInput,
        context: list[dict[str, Any]],
        conversation: ConversationAppend | None,
        trace: list[dict[str, Any]] | None = None,
    ) -> None:
        from ..engine.responses import RunLost

        if response.status != "cancelled" and await self._cancelled_now():
            self._cancel(response)  # the cancel came first: it wins
        try:
            try:
                await self._write(response, context, conversation, trace)
            except (CancelledMeanwhile, Conflict):
                # The end's write refuses to pass a cancel that landed after the look above
                # (with a conversation, that refusal reads as a Conflict: look).
                if response.status == "cancelled" or not await self._cancelled_now():
                    raise
                self._cancel(response)
                await self._write(response, context, conversation, trace)
        except RunGone as err:
            self.lost = True
            raise RunLost(self.response_id) from err

    async def _write(
        self,
        response: OpenAIResponseObjectWithInput,
        context: list[dict[str, Any]],
        conversation: ConversationAppend | None,
        trace: list[dict[str, Any]] | None,
    ) -> None:
        if conversation is None:
            await asyncio.to_thread(
                self.store.save, self.tenant, response, context, self.owner, trace=trace
            )
        else:
            writes = self.store.writes(self.tenant, response, context, self.owner, trace=trace)
            await asyncio.to_thread(self.conversations.append, self.tenant, conversation, writes)

    @staticmethod
    def _cancel(response: OpenAIResponseObjectWithInput) -> None:
        response.status = "cancelled"
        response.completed_at = None

    async def _cancelled_now(self) -> bool:
        self._looked = 0.0
        return await self.cancelled()


def _secrets(body: CreateOpenaiResponseRequest) -> dict[str, dict[str, Any]]:
    """Each MCP server's credentials by label, for the worker's message."""
    return {
        tool.server_label: {"headers": tool.headers, "authorization": tool.authorization}
        for tool in body.tools or []
        if isinstance(tool, OpenAIResponseInputToolMCP) and (tool.headers or tool.authorization)
    }
