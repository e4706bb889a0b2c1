"""Settings are declared: each field read from its upper-case variable by its type."""

from __future__ import annotations

import pytest
from agents_core.settings import Settings


def test_no_variables_mean_the_declared_defaults():
    assert Settings.from_env({}) == Settings()


def test_each_field_is_read_from_its_variable_by_its_type():
    settings = Settings.from_env(
        {
            "MAX_ITERATIONS": "3",
            "STREAM_FLUSH_SECONDS": "0.5",
            "OUTBOUND_ALLOW": " 10.0.0.0/8, mcp.internal ,",
            "SHIELD_FAIL_OPEN": "True",
            "OPENAI_BASE_URL": "http://model:8000/v1",
            "TABLE_NAME": "",  # empty: the default
        }
    )
    assert settings.max_iterations == 3 and settings.stream_flush_seconds == 0.5
    assert settings.outbound_allow == ("10.0.0.0/8", "mcp.internal")
    assert settings.shield_fail_open is True
    assert settings.openai_base_url == "http://model:8000/v1"
    assert settings.table_name == Settings.table_name


def test_a_few_values_are_tidied_and_a_few_follow_from_lambda():
    settings = Settings.from_env(
        {
            "LOCAL_AUTH": " KEYS ",
            "JWT_ISSUER": "https://issuer.example/",
            "EMBEDDING_DIMENSION": "0",
            "RESUME_RETRY_DELAY_SECONDS": "3600",
            "VECTOR_BUCKET_NAME": "arn:aws:s3vectors:us-east-1:123456789012:bucket/vectors",
            "AWS_LAMBDA_FUNCTION_NAME": "turns",
            "MAX_READ_BYTES": "1",  # Lambda's limit, not a variable
        }
    )
    assert settings.local_auth == "keys" and settings.jwt_issuer == "https://issuer.example"
    assert settings.embedding_dimension is None
    assert settings.resume_retry_delay_seconds == 900
    assert settings.vector_bucket_name == "vectors"
    assert settings.require_caller and settings.trust_request_context_header
    assert settings.max_read_bytes == Settings.max_read_bytes
    assert not Settings.from_env({}).require_caller


def test_a_value_of_the_wrong_type_names_its_variable():
    with pytest.raises(ValueError, match="MAX_TOOL_CALLS='many' is not a valid int"):
        Settings.from_env({"MAX_TOOL_CALLS": "many"})


@pytest.mark.parametrize(
    ("environ", "primed", "connects"),
    [
        ({"AWS_LAMBDA_INITIALIZATION_TYPE": "snap-start"}, True, False),
        ({"AWS_LAMBDA_INITIALIZATION_TYPE": "provisioned-concurrency"}, True, True),
        ({"AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand"}, True, True),
        ({}, False, False),
        ({"AWS_LAMBDA_INITIALIZATION_TYPE": "snap-start", "PRIME_AT_INIT": "false"}, False, False),
        ({"PRIME_AT_INIT": "true", "CONNECT_AT_INIT": "true"}, True, True),
        ({"AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand", "CONNECT_AT_INIT": "false"}, True, False),
    ],
)
def test_lambda_inits_are_primed_and_open_connections_but_under_snapstart(
    environ, primed, connects
):
    """Every Lambda init builds what a first request would; all but SnapStart's also open its
    connections (a snapshot would hold the sockets, dead once restored)."""
    settings = Settings.from_env(environ)
    assert (settings.prime_at_init, settings.connect_at_init) == (primed, connects)
