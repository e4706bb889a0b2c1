"""Engine errors the web layer maps to statuses (kept apart so importing them is cheap)."""


class InvalidRequest(ValueError):
    """A turn or response cannot run as asked (call ids that do not match, toolgroups, tool
    types this deployment lacks). HTTP 400."""
