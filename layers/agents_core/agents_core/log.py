"""The service's Powertools logger (JSON lines, correlation id = API Gateway request id)."""

from aws_lambda_powertools import Logger

logger = Logger(service="serverless-agents")
