"""Reward verifier: an HTTP service that scores LLM completions for RL training."""

__version__ = "0.1.0"
