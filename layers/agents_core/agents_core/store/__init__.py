"""DynamoDB single-table storage. The key schema is in `keys`, documented in docs/storage.md;
`engine_storage` is the engine's storage port on these stores."""
