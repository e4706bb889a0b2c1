"""The turn engine: the inference/tool loop, pause and resume, and its stream of events."""
