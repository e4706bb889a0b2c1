"""Resuming turns from the SQS resume queue: the same continuation as HTTP resume, no stream.

A message body is an `AgentTurnResumeRequest` (`agent_id`, `session_id`, `turn_id`,
`tool_responses`; `stream` is ignored); the tenant is the message attribute `tenant` (String),
`default` without one, and the message attribute `resume_token` (String) is the token the turn's
`Turn Awaiting Input` event carried. Records are processed with Powertools' batch processor, and
only the failed ones are reported (`ReportBatchItemFailures`):

- a message without the token of the turn it names under that tenant is rejected: acknowledged
  and dropped, nothing changed (it can never become valid, so retrying it would only cost reads);
  counted as `ResumeMessagesRejected`. The token binds a message to one pause of one turn, so a
  sender cannot pick a tenant or a turn it was not told about;
- a duplicate (the turn already holds a tool step answering exactly these call ids) is
  acknowledged and changes nothing, so at-least-once delivery continues a turn once;
- a poison message (bad JSON, unknown turn, a turn not awaiting input, call ids that do not match
  its pending calls) is logged with the reason and reported, and reaches the DLQ after retries;
- a model failure puts the turn back to awaiting input and reports the record: SQS retries it.

    worker = ResumeQueueWorker(services)
    result = await worker.handle(sqs_event)      # {"batchItemFailures": [...]}
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from pydantic import ValidationError

from .. import metrics
from ..api.agents import AgentTurnResumeRequest, ToolExecutionStep
from ..domain import AWAITING_INPUT
from ..errors import Conflict, InvalidRequest, NotFound, RunFailed, Unauthenticated
from ..log import logger
from ..settings import DEFAULT_TENANT
from . import Services

TENANT_ATTRIBUTE = "tenant"
TOKEN_ATTRIBUTE = "resume_token"


class PoisonMessage(Exception):
    """The message can never succeed; it is reported so that it ends in the DLQ."""


class ModelUnavailable(Exception):
    """The model failed; the turn awaits input again and the message will be retried."""


class ResumeQueueWorker:
    def __init__(self, services: Services) -> None:
        self.services = services

    async def handle(self, event: dict[str, Any], deadline: float | None = None) -> dict[str, Any]:
        """Process an SQS event; the batch processor runs in a thread and each record's
        continuation on this event loop (where the providers' clients live). `deadline`: the
        invocation's end (epoch seconds; locally QUEUE_INVOCATION_SECONDS from now): a turn
        still running when too little of it is left is parked and continued by a new message."""
        if deadline is None:
            deadline = time.time() + self.services.settings.queue_invocation_seconds
        loop = asyncio.get_running_loop()

        def record_handler(record: SQSRecord) -> None:
            asyncio.run_coroutine_threadsafe(self._resume(record, deadline), loop).result()

        return await asyncio.to_thread(
            process_partial_response,
            event=event,
            record_handler=record_handler,
            # A batch of nothing but failures is reported record by record too, not as an error
            # that would retry the good messages with the bad.
            processor=BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False),
        )

    async def _resume(self, record: SQSRecord, deadline: float) -> None:
        log = {"message_id": record.message_id}
        try:
            request = AgentTurnResumeRequest.model_validate_json(record.body)
        except ValidationError as err:
            raise _poison(log, f"invalid body: {err}") from err
        attributes = record.message_attributes
        tenant = DEFAULT_TENANT
        if TENANT_ATTRIBUTE in attributes:
            tenant = attributes[TENANT_ATTRIBUTE].string_value or DEFAULT_TENANT
        token = None
        if TOKEN_ATTRIBUTE in attributes:
            token = attributes[TOKEN_ATTRIBUTE].string_value
        ids = (request.agent_id, request.session_id, request.turn_id)
        log |= {"tenant": tenant, "turn_id": request.turn_id}
        if not token:
            _reject(log, "no resume_token attribute")
            return
        engine = self.services.engine
        try:
            margin = self.services.settings.run_suspend_margin_seconds
            run = await engine.resume_turn(
                tenant,
                *ids,
                request.tool_responses,
                stream=False,
                queued=True,
                resume_token=token,
                should_suspend=lambda: deadline - time.time() < margin,
            )
        except Unauthenticated as err:
            _reject(log, err)
            return
        except Conflict as err:
            answered = {r.call_id for r in request.tool_responses}
            if await self._already_answered(tenant, ids, answered):
                logger.info("duplicate resume message acknowledged", extra=log)
                metrics.count("ResumeMessagesDuplicate")
                return
            raise _poison(log, err) from err
        except (NotFound, InvalidRequest) as err:
            raise _poison(log, err) from err
        recorder, observe = await self._recorder(tenant, request, run.first_event, log)
        try:
            turn = await run.result(observe)
        except RunFailed as failed:
            if failed.retry and run.continuation_token is not None:
                logger.warning("model unavailable; the parked turn continues later", extra=log)
                metrics.count("ResumeMessagesRetried")
                delay = self.services.settings.resume_retry_delay_seconds
                await asyncio.to_thread(
                    self._continue, tenant, request, run.continuation_token, log, delay
                )
                return
            if failed.retry:
                logger.warning("model unavailable; resume will be retried", extra=log)
                metrics.count("ResumeMessagesRetried")
                raise ModelUnavailable(failed.message) from failed
            logger.warning("resumed turn failed", extra={**log, "reason": failed.message})
            return  # the turn is failed and stored; retrying cannot change that
        finally:
            if recorder is not None:  # a paused (or parked) turn's stream goes on later
                await recorder.close(final=run.state.status != AWAITING_INPUT)
        if run.continuation_token is not None:
            await asyncio.to_thread(self._continue, tenant, request, run.continuation_token, log)
            return
        logger.info("turn resumed from the queue", extra={**log, "status": _status(turn)})
        metrics.count("ResumeMessagesApplied")

    async def _recorder(
        self, tenant: str, request: AgentTurnResumeRequest, start: int | None, log: dict[str, Any]
    ) -> tuple[Any, Any]:
        """The turn's stream goes on here, recorded for its followers (the turn's rejoin
        route), numbered from `start`, the turn's count of events so far; when that is unknown
        (a turn paused before it was counted), after its last stored event. (None, None) when
        that cannot be read."""
        from .streams import StreamKey, turn_frame

        key = StreamKey.turn(request.session_id, request.turn_id)
        start = await self.services.streams.continues_at(tenant, key, start, log)
        if start is None:
            return None, None
        recorder = self.services.streams.recorder(tenant, key)
        seq = iter(range(start, start + 1_000_000))

        def observe(item: Any) -> None:
            recorder.add(turn_frame(next(seq), item))

        return recorder, observe

    def _continue(
        self,
        tenant: str,
        request: AgentTurnResumeRequest,
        token: str,
        log: dict[str, Any],
        delay_seconds: int = 0,
    ) -> None:
        """The turn was parked (for time, or after its model failed): its continuation, a
        resume with no tool responses carrying the new token, goes back on the queue, visible
        after `delay_seconds` (a few tries; failing them, the turn stays parked, and a resume
        with no tool responses over HTTP continues it)."""
        body = AgentTurnResumeRequest(
            agent_id=request.agent_id,
            session_id=request.session_id,
            turn_id=request.turn_id,
            tool_responses=[],
        ).model_dump_json()
        attributes = {
            TENANT_ATTRIBUTE: {"DataType": "String", "StringValue": tenant},
            TOKEN_ATTRIBUTE: {"DataType": "String", "StringValue": token},
        }
        settings = self.services.settings
        for attempt in range(3):
            try:
                self.services.sqs.send_message(
                    QueueUrl=self.services.queue_url(
                        settings.resume_queue_url, settings.resume_queue_name
                    ),
                    MessageBody=body,
                    MessageAttributes=attributes,
                    DelaySeconds=delay_seconds,
                )
                logger.info("turn continues in a new invocation", extra=log)
                metrics.count("ResumeMessagesContinued")
                return
            except Exception:
                logger.exception("could not send a turn's continuation", extra=log)
                time.sleep(0.2 * 2**attempt)
        metrics.count("ResumeContinuationsLost")

    async def _already_answered(
        self, tenant: str, ids: tuple[str, str, str], call_ids: set[str]
    ) -> bool:
        try:
            turn = await self.services.turn_storage.turn(tenant, *ids)
        except NotFound:
            return False
        return any(
            isinstance(step, ToolExecutionStep)
            and {r.call_id for r in step.tool_responses} == call_ids
            for step in turn.steps
        )


def _reject(log: dict[str, Any], reason: Any) -> None:
    logger.warning("resume message rejected and dropped", extra={**log, "reason": str(reason)})
    metrics.count("ResumeMessagesRejected")


def _poison(log: dict[str, Any], reason: Any) -> PoisonMessage:
    logger.warning("poison resume message", extra={**log, "reason": str(reason)})
    metrics.count("ResumeMessagesPoison")
    return PoisonMessage(str(reason))


def _status(turn: Any) -> str:
    return "awaiting_input" if turn.output_message.tool_calls else "completed"


def ensure_resume_queue(
    sqs: Any, name: str, max_receive_count: int = 5, visibility_seconds: int = 30
) -> str:
    """Create the queue and its dead-letter queue (redrive after `max_receive_count`) if missing;
    the queue's URL. For local runs: template.yaml declares the same pairs (the resume queue's,
    the background queue's)."""
    dlq_url = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    redrive = f'{{"deadLetterTargetArn": "{dlq_arn}", "maxReceiveCount": "{max_receive_count}"}}'
    return sqs.create_queue(
        QueueName=name,
        Attributes={"RedrivePolicy": redrive, "VisibilityTimeout": str(visibility_seconds)},
    )["QueueUrl"]


def lambda_sqs_event(messages: list[dict[str, Any]], queue_arn: str, region: str) -> dict[str, Any]:
    """ReceiveMessage results in the shape of the SQS event Lambda hands a function."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {
                    name: {
                        "stringValue": value.get("StringValue"),
                        "dataType": value["DataType"],
                        "stringListValues": [],
                        "binaryListValues": [],
                    }
                    for name, value in m.get("MessageAttributes", {}).items()
                },
                "md5OfBody": m.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
            for m in messages
        ]
    }


async def poll_forever(sqs: Any, queue_url: str, worker: Any, batch_size: int = 10) -> None:
    """What Lambda's event source mapping does, for local runs: receive batches, hand them to
    the worker, delete what succeeded; failures become visible again and are retried (and
    redriven to the DLQ after the queue's maxReceiveCount)."""
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    region = sqs.meta.region_name
    while True:
        try:
            resp = await asyncio.to_thread(
                sqs.receive_message,
                QueueUrl=queue_url,
                MaxNumberOfMessages=batch_size,
                WaitTimeSeconds=1,
                MessageAttributeNames=["All"],
                AttributeNames=["All"],
            )
            messages = resp.get("Messages", [])
            if not messages:
                continue
            result = await worker.handle(lambda_sqs_event(messages, arn, region))
            failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
            done = [
                {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]}
                for n, m in enumerate(messages)
                if m["MessageId"] not in failed
            ]
            if done:
                await asyncio.to_thread(sqs.delete_message_batch, QueueUrl=queue_url, Entries=done)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("queue poll failed", extra={"queue_url": queue_url})
            await asyncio.sleep(1)
