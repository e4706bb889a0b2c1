"""Settings read once from the environment: one typed object, no other place reads os.environ."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Settings:
    table_name: str = "serverless-agents"
    #: Lifetime of sessions of agents with `enable_session_persistence: false`
    #: (see docs/storage.md).
    ephemeral_session_ttl_seconds: int = 24 * 3600

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            table_name=os.environ.get("TABLE_NAME", cls.table_name),
            ephemeral_session_ttl_seconds=int(
                os.environ.get("EPHEMERAL_SESSION_TTL_SECONDS", cls.ephemeral_session_ttl_seconds)
            ),
        )
