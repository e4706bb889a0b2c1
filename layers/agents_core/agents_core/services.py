"""Everything a function serves with, built once per Lambda container (or local server)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .settings import Settings
from .store import AgentStore
from .store.turns import TurnStore


@dataclass
class Services:
    agents: AgentStore
    turns: TurnStore
    settings: Settings
    _engine: Any = None

    @property
    def engine(self):
        """The turn engine, created on first use so CRUD-only functions never import it."""
        if self._engine is None:
            from .engine.turns import TurnEngine
            from .inference.router import InferenceSettings, ModelRouter

            router = ModelRouter(
                InferenceSettings(
                    openai_base_url=self.settings.openai_base_url,
                    openai_api_key=self.settings.openai_api_key,
                    timeout_seconds=self.settings.inference_timeout_seconds,
                )
            )
            self._engine = TurnEngine(self.agents, self.turns, router)
        return self._engine


def build_services(settings: Settings, dynamodb: Any = None) -> Services:
    if dynamodb is None:
        from . import aws

        dynamodb = aws.client("dynamodb")
    return Services(
        agents=AgentStore(
            dynamodb,
            settings.table_name,
            ephemeral_session_ttl_seconds=settings.ephemeral_session_ttl_seconds,
        ),
        turns=TurnStore(dynamodb, settings.table_name, lease_seconds=settings.turn_lease_seconds),
        settings=settings,
    )
