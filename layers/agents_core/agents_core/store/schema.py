"""The table's definition, for creating it locally. template.yaml declares the same table
(a test keeps the two in step)."""

from __future__ import annotations

from typing import Any

TTL_ATTRIBUTE = "expires_at"

_KEYS = ("PK", "SK", "GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK")

TABLE_DEFINITION: dict[str, Any] = {
    "BillingMode": "PAY_PER_REQUEST",
    "AttributeDefinitions": [{"AttributeName": k, "AttributeType": "S"} for k in _KEYS],
    "KeySchema": [
        {"AttributeName": "PK", "KeyType": "HASH"},
        {"AttributeName": "SK", "KeyType": "RANGE"},
    ],
    "GlobalSecondaryIndexes": [
        {
            "IndexName": name,
            "KeySchema": [
                {"AttributeName": f"{name}PK", "KeyType": "HASH"},
                {"AttributeName": f"{name}SK", "KeyType": "RANGE"},
            ],
            "Projection": {"ProjectionType": "ALL"},
        }
        for name in ("GSI1", "GSI2")
    ],
}


def create_table_if_missing(client: Any, table_name: str) -> bool:
    """Create the table (and enable TTL) unless it exists; True when this call created it. A
    creator racing this one (two local servers started at once) is not an error: its table is
    waited for (bounded) and used."""
    try:
        client.describe_table(TableName=table_name)
        return False
    except client.exceptions.ResourceNotFoundException:
        pass
    try:
        client.create_table(TableName=table_name, **TABLE_DEFINITION)
    except client.exceptions.ResourceInUseException:  # created meanwhile by another
        client.get_waiter("table_exists").wait(
            TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
        )
        return False
    client.get_waiter("table_exists").wait(
        TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
    )
    client.update_time_to_live(
        TableName=table_name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
    )
    return True
