"""The single-table key schema (docs/storage.md is the reference; keep the two in step).

Every partition key starts with the tenant, so one tenant's query can never reach another's items.
"""

from __future__ import annotations

AGENT = "AGENT"
SESSION = "SESSION"
RESPONSE = "RESPONSE"
CONTEXT = "CONTEXT"  # a response's conversation through it
RUN = "RUN"  # a background response's run, while it runs
RUN_STATE_PREFIX = "RUNSTATE#"  # its state records: RUNSTATE#{owner}#{version}
SHIELD_PREFIX = "SHIELD#"

SESSION_REF_PREFIX = "SESSION#"
TURN_PREFIX = "TURN#"
STEP_PREFIX = "STEP#"
#: A record too large for one item continues in items `{its SK}#PART#{n:04d}`.
PART_MARK = "#PART#"


def _tenant(tenant: str) -> str:
    # '#' separates key parts; escape it (and the escape character) inside a tenant id.
    return "T#" + tenant.replace("%", "%25").replace("#", "%23")


def agent_pk(tenant: str, agent_id: str) -> str:
    return f"{_tenant(tenant)}#AGENT#{agent_id}"


def agents_gsi1pk(tenant: str) -> str:
    return f"{_tenant(tenant)}#AGENTS"


def session_ref_sk(session_id: str) -> str:
    """The session's entry in its agent's partition, used to list and cascade."""
    return f"{SESSION_REF_PREFIX}{session_id}"


def session_id_of_ref(sk: str) -> str:
    return sk.removeprefix(SESSION_REF_PREFIX)


def session_pk(tenant: str, session_id: str) -> str:
    return f"{_tenant(tenant)}#SESSION#{session_id}"


def turn_sk(turn_id: str) -> str:
    return f"{TURN_PREFIX}{turn_id}"


def after_turn(turn_sort_key: str) -> str:
    """A sort key past a turn item and its parts, before any later turn."""
    return f"{turn_sort_key}#~"


def step_sk(turn_id: str, step_id: str) -> str:
    """Steps sort apart from turns, so the history query reads turn items only."""
    return f"{steps_prefix(turn_id)}{step_id}"


def steps_prefix(turn_id: str) -> str:
    """The sort-key prefix of a turn's step items (and their parts)."""
    return f"{STEP_PREFIX}{turn_id}#"


def turn_id_of_step(sk: str) -> str:
    return sk.removeprefix(STEP_PREFIX).split("#")[0]


def part_sk(sk: str, n: int) -> str:
    return f"{sk}{PART_MARK}{n:04d}"


def parts_prefix(sk: str) -> str:
    return f"{sk}{PART_MARK}"


def record_of_part(sk: str) -> str:
    """The sort key of the record a part belongs to (a record's own key is returned as is)."""
    return sk.split(PART_MARK)[0]


def is_part(sk: str) -> bool:
    return PART_MARK in sk


def response_pk(tenant: str, response_id: str) -> str:
    return f"{_tenant(tenant)}#RESPONSE#{response_id}"


def responses_gsi1pk(tenant: str) -> str:
    return f"{_tenant(tenant)}#RESPONSES"


def responses_by_model_gsi2pk(tenant: str, model: str) -> str:
    return f"{_tenant(tenant)}#RESPONSES#MODEL#{model}"


TOOLGROUP_PREFIX = "TOOLGROUP#"


def toolgroups_pk(tenant: str) -> str:
    """A tenant's registered tool groups share one partition: one query lists them all."""
    return f"{_tenant(tenant)}#TOOLGROUPS"


def toolgroup_sk(toolgroup_id: str) -> str:
    return f"{TOOLGROUP_PREFIX}{toolgroup_id}"


def shields_pk(tenant: str) -> str:
    """A tenant's registered shields share one partition: few, small, listed together."""
    return f"{_tenant(tenant)}#SHIELDS"


def shield_sk(identifier: str) -> str:
    return f"{SHIELD_PREFIX}{identifier}"


PROMPT_PREFIX = "PROMPT#"
PROMPT_VERSION_PREFIX = "PVER#"


def prompts_pk(tenant: str) -> str:
    """A tenant's prompts share one partition: a head per prompt (its latest and default
    version, with the default's text) and an item per version."""
    return f"{_tenant(tenant)}#PROMPTS"


def prompt_sk(prompt_id: str) -> str:
    return f"{PROMPT_PREFIX}{prompt_id}"


def prompt_version_sk(prompt_id: str, version: int) -> str:
    return f"{PROMPT_VERSION_PREFIX}{prompt_id}#{version:09d}"


# --- conversations (OpenAI Conversations API) ---------------------------------------------

CONVERSATION = "CONVERSATION"  # sorts before its items (ITEM#) and their parts (PART#)
ITEM_PREFIX = "ITEM#"
ITEM_PART_PREFIX = "PART#"


def conversation_pk(tenant: str, conversation_id: str) -> str:
    return f"{_tenant(tenant)}#CONVERSATION#{conversation_id}"


def conversations_gsi1pk(tenant: str) -> str:
    return f"{_tenant(tenant)}#CONVERSATIONS"


def conversation_items_gsi2pk(tenant: str, conversation_id: str) -> str:
    """Items of a conversation by item id (GSI2SK = the item id)."""
    return f"{conversation_pk(tenant, conversation_id)}#ITEMS"


def item_sk(seq: int) -> str:
    """An item's place in its conversation: sequence numbers sort as text."""
    return f"{ITEM_PREFIX}{seq:010d}"


def seq_of_item(sk: str) -> int:
    return int(sk.removeprefix(ITEM_PREFIX))


def item_parts_prefix(seq: int, token: str) -> str:
    """Parts of a large item, apart from the items (a page of items reads no parts) and
    named by their writer's token (a writer that lost a race never overwrites a winner's)."""
    return f"{ITEM_PART_PREFIX}{seq:010d}#{token}#"


# --- stream events (rejoinable SSE streams) ----------------------------------------------

#: Stream event items sort before everything a session or response read asks for (`SESSION`,
#: `STEP#`, `TURN#`, `RESPONSE`, `CONTEXT`), in the partition of what they belong to, so a
#: delete of the response or session takes them along.
EVENT_PREFIX = "EVENT#"


def response_events_prefix() -> str:
    """A response's events, in its own partition (`response_pk`)."""
    return EVENT_PREFIX


def turn_events_prefix(turn_id: str) -> str:
    """A turn's events, in its session's partition (`session_pk`), one turn apart from the next."""
    return f"{EVENT_PREFIX}{turn_id}#"


def event_sk(prefix: str, seq: int) -> str:
    """The item holding frames from `seq` on (a batch, or the parts of one large frame at
    `{event_sk}#{n:04d}`); the stream's end mark is `{prefix}~`, after every number."""
    return f"{prefix}{seq:010d}"


def event_part_sk(prefix: str, seq: int, n: int) -> str:
    return f"{event_sk(prefix, seq)}#{n:04d}"


def events_end_sk(prefix: str) -> str:
    return f"{prefix}~"


def is_event_part(sk: str) -> bool:
    """A part of a large frame (`{event_sk}#{n:04d}`); a turn's prefix has a `#` of its own."""
    return sk[-5:-4] == "#"


# --- files and vector stores (OpenAI Files and Vector stores APIs) ------------------------

FILE = "FILE"  # a file's head item
UPLOAD = "UPLOAD"  # a presigned upload not completed yet
FILE_STORE_PREFIX = "VECTORSTORE#"  # under a file: the stores holding it
VECTOR_STORE = "VECTORSTORE"  # a store's head item
STORE_FILE_PREFIX = "FILE#"  # under a store: its files


def file_pk(tenant: str, file_id: str) -> str:
    return f"{_tenant(tenant)}#FILE#{file_id}"


def files_gsi1pk(tenant: str) -> str:
    return f"{_tenant(tenant)}#FILES"


def vector_store_pk(tenant: str, store_id: str) -> str:
    return f"{_tenant(tenant)}#VECTORSTORE#{store_id}"


def vector_stores_gsi1pk(tenant: str) -> str:
    return f"{_tenant(tenant)}#VECTORSTORES"


def store_file_sk(file_id: str) -> str:
    return f"{STORE_FILE_PREFIX}{file_id}"


def file_store_sk(store_id: str) -> str:
    return f"{FILE_STORE_PREFIX}{store_id}"


def file_object_key(tenant: str, file_id: str) -> str:
    """The S3 key of a file's bytes: the tenant first, escaped as in table keys, so an IAM
    policy can scope a role to `tenants/*`."""
    escaped = tenant.replace("%", "%25").replace("/", "%2F").replace("#", "%23")
    return f"tenants/{escaped}/files/{file_id}"
