"""Everything a function serves with, built once per Lambda container (or local server)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .settings import Settings


@dataclass
class Services:
    """What a function serves with. Each part is created on first use, so a function imports
    (and builds, at its cold start) only what its routes touch."""

    settings: Settings
    dynamodb: Any = None
    events_client: Any = None  # EventBridge; created at the first publish unless given
    _agents: Any = None
    _turns: Any = None
    _responses: Any = None
    _models: Any = None
    _engine: Any = None
    _responses_engine: Any = None

    @property
    def agents(self):
        """Agents and sessions."""
        if self._agents is None:
            from .store.agents import AgentStore

            self._agents = AgentStore(
                self.dynamodb,
                self.settings.table_name,
                ephemeral_session_ttl_seconds=self.settings.ephemeral_session_ttl_seconds,
            )
        return self._agents

    @property
    def turns(self):
        """Turns, steps and the session lock."""
        if self._turns is None:
            from .store.turns import TurnStore

            self._turns = TurnStore(
                self.dynamodb,
                self.settings.table_name,
                lease_seconds=self.settings.turn_lease_seconds,
            )
        return self._turns

    @property
    def responses(self):
        """The responses store, created on first use (only the responses function needs it)."""
        if self._responses is None:
            from .store.responses import ResponseStore

            self._responses = ResponseStore(self.dynamodb, self.settings.table_name)
        return self._responses

    @property
    def models(self):
        """Model id to provider routing, created on first use (CRUD functions never need it)."""
        if self._models is None:
            from .inference.router import InferenceSettings, ModelRouter

            self._models = ModelRouter(
                InferenceSettings(
                    openai_base_url=self.settings.openai_base_url,
                    openai_api_key=self.settings.openai_api_key,
                    timeout_seconds=self.settings.inference_timeout_seconds,
                )
            )
        return self._models

    @property
    def engine(self):
        """The turn engine, created on first use."""
        if self._engine is None:
            from .engine.turns import TurnEngine
            from .lifecycle import TurnEventPublisher

            publisher = TurnEventPublisher(self.events_client, self.settings.event_bus_name)
            self._engine = TurnEngine(self.agents, self.turns, self.models, publisher)
        return self._engine

    @property
    def responses_engine(self):
        """The Responses API engine, created on first use."""
        if self._responses_engine is None:
            from .engine.responses import ResponsesEngine

            self._responses_engine = ResponsesEngine(self.responses, self.models)
        return self._responses_engine


def build_services(settings: Settings, dynamodb: Any = None, events: Any = None) -> Services:
    if dynamodb is None:
        from . import aws

        dynamodb = aws.client("dynamodb")
    return Services(settings=settings, dynamodb=dynamodb, events_client=events)
