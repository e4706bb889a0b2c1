"""The single-table key schema (docs/storage.md is the reference; keep the two in step).

Every partition key starts with the tenant, so one tenant's query can never reach another's items.
"""

from __future__ import annotations

AGENT = "AGENT"
SESSION = "SESSION"
RESPONSE = "RESPONSE"


def _tenant(tenant: str) -> str:
    # '#' separates key parts; escape it (and the escape character) inside a tenant id.
    return "T#" + tenant.replace("%", "%25").replace("#", "%23")


def agent_pk(tenant: str, agent_id: str) -> str:
    return f"{_tenant(tenant)}#AGENT#{agent_id}"


def agents_gsi1pk(tenant: str) -> str:
    return f"{_tenant(tenant)}#AGENTS"


def session_ref_sk(session_id: str) -> str:
    """The session's entry in its agent's partition, used to list and cascade."""
    return f"SESSION#{session_id}"


def session_pk(tenant: str, session_id: str) -> str:
    return f"{_tenant(tenant)}#SESSION#{session_id}"


def turn_sk(turn_id: str) -> str:
    return f"TURN#{turn_id}"


def step_sk(turn_id: str, step_id: str) -> str:
    """Steps sort apart from turns, so the history query reads turn items only."""
    return f"STEP#{turn_id}#{step_id}"


def response_pk(tenant: str, response_id: str) -> str:
    return f"{_tenant(tenant)}#RESPONSE#{response_id}"


def responses_gsi1pk(tenant: str) -> str:
    return f"{_tenant(tenant)}#RESPONSES"


def responses_by_model_gsi2pk(tenant: str, model: str) -> str:
    return f"{_tenant(tenant)}#RESPONSES#MODEL#{model}"
