"""What runs did, as OpenTelemetry spans: the span records a run keeps with its turn or
response (`spans`), and their export over OTLP/HTTP (`otlp`, imported only when an endpoint is
configured)."""
