"""HTTP layer: FastAPI routers per resource, request context, error mapping, the app factory."""
