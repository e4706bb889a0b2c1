"""Pieces every router shares: path ids and JSON responses."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Response
from pydantic import BaseModel

#: Ids are ours (UUIDs) or a migrated client's; '#' and other separators never reach a key.
ID_PATTERN = r"^[A-Za-z0-9_-]{1,128}$"

AgentId = Annotated[str, Path(pattern=ID_PATTERN)]
SessionId = Annotated[str, Path(pattern=ID_PATTERN)]
TurnId = Annotated[str, Path(pattern=ID_PATTERN)]
StepId = Annotated[str, Path(pattern=ID_PATTERN)]


def json_response(model: BaseModel, status_code: int = 200) -> Response:
    """Serialize once with pydantic; each route names its model under `responses` for the docs."""
    return Response(
        content=model.model_dump_json(), media_type="application/json", status_code=status_code
    )
