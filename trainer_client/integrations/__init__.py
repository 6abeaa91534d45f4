"""Adapters that plug the verifier into RL trainers other than TRL, each through the trainer's own configuration.

One module per trainer (see docs/trainers.md for the flags):

- `verl`: `compute_score` (async), `compute_score_sync`, `compute_score_batch` for `reward.custom_reward_function`;
- `verifiers`: `score(task, trace)`, a plugged reward of PrimeIntellect verifiers (v1 API);
- `openrlhf_reward_func`: a file for OpenRLHF's `--reward.remote_url /path/to/openrlhf_reward_func.py`;
- `slime`: `rm(args, sample_or_samples)` for slime's `--custom-rm-path`;
- `nemo_rl`: `RewardVerifierEnvironment`, a NeMo-RL environment.

What they share is in `common` (options, the item for a sample, what an unjudged item becomes), `ground_truth` (a
dataset's ground truth as component specs) and `coalesce` (concurrent per-sample calls on one event loop become one
`/v1/score` request). No module here imports a trainer's package at import time: importing an adapter costs what
`import trainer_client` costs.
"""
