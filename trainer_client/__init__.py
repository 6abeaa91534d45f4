"""Trainer client of the reward verifier: httpx clients, TRL reward functions, and a GRPO training script.

`import trainer_client` pulls in httpx and pydantic (through `verifier_service.schema`), never the service's
server side (fastapi, sympy, math_verify) nor docker, nor torch/trl: the training script imports those itself.
"""

from trainer_client.async_client import AsyncVerifierClient
from trainer_client.client import VerifierClient
from trainer_client.config import DEFAULT_URL, ClientConfig
from trainer_client.errors import (
    VerifierConfigError,
    VerifierConnectionError,
    VerifierError,
    VerifierNotReadyError,
    VerifierRequestError,
    VerifierResponseError,
    VerifierServerError,
    VerifierStatusError,
    VerifierTimeoutError,
    VerifierUnavailableError,
    VerifierUnjudgedError,
)
from trainer_client.reward_group import VerifierRewards
from trainer_client.rewards import AsyncVerifierReward, VerifierReward

__all__ = [
    "DEFAULT_URL",
    "AsyncVerifierClient",
    "AsyncVerifierReward",
    "ClientConfig",
    "VerifierClient",
    "VerifierConfigError",
    "VerifierConnectionError",
    "VerifierError",
    "VerifierNotReadyError",
    "VerifierRequestError",
    "VerifierResponseError",
    "VerifierReward",
    "VerifierRewards",
    "VerifierServerError",
    "VerifierStatusError",
    "VerifierTimeoutError",
    "VerifierUnavailableError",
    "VerifierUnjudgedError",
]
