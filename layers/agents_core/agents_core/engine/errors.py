"""Engine errors the web layer maps to statuses (kept apart so importing them is cheap)."""


class InvalidTurnRequest(ValueError):
    """The request cannot run as asked (unknown tool call ids, unsupported options). HTTP 400."""
