"""GRPO with the verifier as the reward: `python -m trainer_client.train`.

TRL script conventions (as `trl/scripts/grpo.py`): `TrlParser` over the script arguments below, `GRPOConfig` and
`ModelConfig`, so every GRPOConfig flag works (`--max_steps`, `--num_generations`, `--use_vllm`, `--bf16`, ...),
and `--config run.yaml` reads the same names from a YAML file (command-line flags win). `--help` lists this script's
flags and the TRL flags most runs set without loading TRL (which, with torch and transformers, is imported only once
the arguments are read); `--help-all` lists them all.

    python -m trainer_client.train --model_name_or_path Qwen/Qwen2.5-0.5B-Instruct --dataset_name openai/gsm8k \\
        --verifier_url http://127.0.0.1:8088 --output_dir runs/gsm8k --max_steps 200

Data: GSM8K by default; `--prompt_column`, `--solution_column`, `--tests_column` and `--options_column` name the
columns of other datasets (MATH, MBPP, HumanEval, MMLU: see `trainer_client.data`); `--reward_components` picks
the verifier's components, one reward function each (code, choice, answer, overlong, length, repetition...).
`overlong` and `length` take `max_tokens` from `--max_completion_length`, every reward function the trainer's EOS
and pad ids (for `truncated`), and `--reward_options` sets any other component option.

Before it loads the data or the model, the script checks the verifier: it waits for `GET /readyz` (progress lines
say what it waits for), fails after `--verifier_connect_grace` seconds when nothing listens at `--verifier_url`,
waits up to `--verifier_ready_timeout` for one that answers but is still starting, and sends one scored item to
check the API key. Each failure exits with a message naming the flag that fixes it.

While training, a verifier that stops answering costs rewards (None) but not the run; after
`--max_consecutive_failures` reward calls in a row without a reward, the script saves the last completed step as a
resumable checkpoint (`<output_dir>/checkpoint-<step>`, as the Trainer's periodic saves) and exits with a message
giving the `--resume_from_checkpoint` flag that continues from it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from trainer_client.client import VerifierClient
from trainer_client.config import DEFAULT_URL, api_key_or_env
from trainer_client.data import Columns, load_prompts
from trainer_client.data_check import check_data
from trainer_client.domains import DATASET_SHAPES, SPEC_COLUMN
from trainer_client.errors import (
    VerifierConnectionError,
    VerifierError,
    VerifierNotReadyError,
    VerifierRequestError,
    VerifierUnavailableError,
)
from trainer_client.gsm8k import HUB_ID
from trainer_client.options import PLACEHOLDER_ROWS, row_fields, template_item
from trainer_client.reward_group import VerifierRewards
from trainer_client.rewards import AsyncVerifierReward, VerifierReward
from trainer_client.timings import log_timings
from trainer_client.tokens import stop_token_ids
from verifier_service.schema import COMPONENTS, PRIMARIES, ScoreItem

if TYPE_CHECKING:  # TRL, transformers and torch load only once the arguments are parsed (`--help` stays instant)
    from trl import GRPOConfig, GRPOTrainer, ModelConfig, TrlParser

logger = logging.getLogger("trainer_client.train")
PROG = "python -m trainer_client.train"


@dataclass
class VerifierScriptArguments:
    """Script arguments: the dataset (TRL's `ScriptArguments` names), where the verifier is and which rewards to ask it
    for. Not TRL's class itself, so that reading them needs no TRL."""

    dataset_name: str | None = field(
        default=HUB_ID,
        metadata={"help": "Hub dataset id or a local .json/.jsonl file."},
    )
    dataset_config: str | None = field(
        default=None, metadata={"help": "The dataset's configuration (load_dataset's name; GSM8K: main)."}
    )
    dataset_train_split: str = field(default="train", metadata={"help": "The split to train on."})
    dataset_test_split: str = field(
        default="test", metadata={"help": "The split to evaluate on (with --eval_strategy)."}
    )
    prompt_column: str = field(
        default="question",
        metadata={"help": "Column of the prompts: text (the system prompt is added) or a chat (kept as is)."},
    )
    solution_column: str = field(
        default="answer",
        metadata={
            "help": "Column of the gold answers. For math: a GSM8K solution ('#### N'), a MATH solution (its "
            "\\boxed{} answer counts), or a bare answer; for choice: the letter (or a list of letters, or a 0-based "
            "option index, as MMLU's answer); for answer: the answer or a list of aliases; for json_schema: the "
            "JSON Schema (an object or its JSON string, as NeMo-Gym's schema_str)."
        },
    )
    tests_column: str = field(
        default="tests",
        metadata={
            "help": "Column of the code tests, for the code reward: a list of tests or its JSON string, or a list of "
            "assert strings (MBPP's test_list); a HumanEval test string when the dataset has an entry_point column. "
            "Codeforces, CodeContests: the test sets, comma-separated (default: all)."
        },
    )
    tests_in_prompt: bool = field(
        default=True,
        metadata={
            "help": "With code rewarded: append MBPP-style assert tests to a text prompt ('Your code should pass "
            "these tests: ...'), as MBPP's own prompt does, since its task text names no function."
        },
    )
    options_column: str | None = field(
        default=None,
        metadata={
            "help": "Column of the option texts of a multiple-choice question, for the choice reward: a list in letter "
            "order (MMLU's choices, MMLU-Pro's options). Listed under a text prompt (A. ..., B. ...) and sent to the "
            "verifier, which then also takes an answer that names an option by its text."
        },
    )
    options_in_prompt: bool = field(
        default=True,
        metadata={"help": "With --options_column: list the options under a text prompt (off when it lists them)."},
    )
    spec_column: str | None = field(
        default=None,
        metadata={
            "help": "Column of per-row component specs, {component: spec} as an object or its JSON string (e.g. "
            '{"instructions": {"instruction_ids": [...], "kwargs": [...]}}): how any component gets what it grades '
            "a row by; a row's spec wins over --solution_column and --tests_column."
        },
    )
    dataset_shape: str = field(
        default="auto",
        metadata={
            "help": f"How rows of other domains become specs: {', '.join(DATASET_SHAPES)}. auto picks by the columns "
            "(instruction_id_list: ifeval; ground_truth: open_instruct; db_id with SQL: bird; metadata: "
            "reasoning_gym; schema: json_schema; official_tests: codeforces; private_tests: code_contests; "
            "docs/trainers.md says which, and what each maps to); none maps nothing."
        },
    )
    sql_databases: str | None = field(
        default=None,
        metadata={
            "help": "A directory of the SQLite databases text-to-SQL rows name by db_id (NAME.sqlite, or "
            "NAME/NAME.sqlite as BIRD's dev_databases/ and Spider's database/ ship): a row with no schema of its own "
            "is shown its database's CREATE statements in the prompt. The verifier runs the queries on the same "
            "files (VERIFIER_SQL_DATABASES); every db_id must be there."
        },
    )
    verifier_url: str = field(
        default=DEFAULT_URL,
        metadata={"help": "Base URL of the verifier service; several, comma-separated, to spread batches over them."},
    )
    verifier_api_key: str | None = field(
        default=None, metadata={"help": "API key of the verifier; default: the VERIFIER_API_KEY environment variable."}
    )
    verifier_ready_timeout: float = field(
        default=300.0,
        metadata={
            "help": "Seconds to wait for a verifier that answers but is not ready yet (HTTP 503 while it starts)."
        },
    )
    verifier_connect_grace: float = field(
        default=20.0,
        metadata={
            "help": "Seconds to keep trying while nothing listens at --verifier_url (connection refused, unknown "
            "host) before failing: time for a verifier started at the same moment to come up."
        },
    )
    reward_components: list[str] = field(
        default_factory=lambda: ["math", "format"],
        metadata={
            "help": f"Verifier components to reward, each logged as its own reward, all scored in one request per "
            f"batch: {', '.join(COMPONENTS)}. overlong and length get max_tokens from --max_completion_length; length "
            "reads correctness from the first of math, code, choice, answer rewarded (else math, at weight 0)."
        },
    )
    reward_options: dict[str, Any] | str | None = field(
        default=None,
        metadata={
            "help": 'Component options as JSON, e.g. \'{"overlong": {"buffer_tokens": 256}, "length": {"mode": '
            '"target", "target_tokens": 300, "wrong_score": -0.5}, "repetition": {"n": 4}}\' (GET /v1/components '
            "lists them); they win over the ones the script sets."
        },
    )
    combined_reward: bool = field(
        default=False, metadata={"help": "One reward function for all components (their sum) instead of one each."}
    )
    allow_order_inversion: bool = field(
        default=False,
        metadata={
            "help": "Let the rewards' options and --reward_weights give a wrong answer as much as a right one (the "
            "verifier refuses such a request otherwise)."
        },
    )
    async_rewards: bool = field(default=False, metadata={"help": "Use the async reward functions."})
    format_prefilled: bool = field(
        default=False, metadata={"help": "The chat template already opens <think> (format check accounts for it)."}
    )
    max_consecutive_failures: int = field(
        default=10,
        metadata={
            "help": "Stop after this many reward calls in a row got no reward from the verifier, saving the last "
            "completed step as a checkpoint to resume from."
        },
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only the first N training rows."})
    log_timings: bool = field(
        default=True,
        metadata={
            "help": "Log where each step's time goes next to TRL's step_time: timing/generation, timing/rewards (the "
            "wait for the verifier), timing/weight_sync, in seconds per generation batch, and gpu/peak_memory_gib."
        },
    )
    check_data: bool = field(
        default=False,
        metadata={
            "help": "Check the data and stop, before the model loads: say which column feeds the prompt, the gold "
            "answers and the tests, and have the verifier parse every gold (rows it cannot parse would get no "
            "reward). Exit status 1 when some row's gold or tests cannot be used. Needs no GPU (the device flags are "
            "read as for a CPU) and no model."
        },
    )
    online_rm: str | None = field(
        default=None,
        metadata={
            "help": "A reward model the verifier serves (VERIFIER_MODELS) to fine-tune on this run's rule outcomes, "
            "reload and evaluate every --online_rm_every steps (online_rm/ metrics; trainer_client.online_rm)."
        },
    )
    online_rm_every: int = field(default=10, metadata={"help": "Steps between updates of --online_rm."})
    online_rm_method: str = field(
        default="pairs", metadata={"help": "pairs (RewardTrainer) or outcome (PRIME's loss); a prm: step labels."}
    )
    online_rm_learning_rate: float = field(default=1e-4, metadata={"help": "The reward model's learning rate."})
    online_rm_epochs: int = field(default=1, metadata={"help": "Passes over the outcomes kept, per update."})
    online_rm_checkpoint: str | None = field(
        default=None, metadata={"help": "The checkpoint to start from; default: its path in GET /v1/models."}
    )
    online_rm_output_dir: str | None = field(
        default=None,
        metadata={
            "help": "Where updates go (step-N), under the verifier's VERIFIER_MODEL_ROOTS; default: <output_dir>/rm."
        },
    )
    system_prompt: str | None = field(
        default=None,
        metadata={
            "help": "System message added to text prompts. Default: one asking for <think> reasoning and then, after "
            "the task the rewards check (math; else code, choice, answer), the final answer, one fenced python (C++ "
            "for contest shapes) block, the option's letter in \\boxed{}, or a short answer in <answer> tags."
        },
    )


def make_parser(dry_run: bool = False) -> TrlParser:
    """TRL's parser over these arguments, GRPOConfig and ModelConfig (this imports TRL, transformers and torch); for
    a dry run (`--check_data`), GRPOConfig as `dry_run_config` makes it."""
    from trl import GRPOConfig, ModelConfig, TrlParser

    config = dry_run_config() if dry_run else GRPOConfig
    return TrlParser(cast(Any, (VerifierScriptArguments, config, ModelConfig)), prog=PROG)


def dry_run_config() -> Any:
    """GRPOConfig for `--check_data`, which trains nothing: validated as for a CPU, whatever the command says of the
    device, so a dry run needs no GPU (TrainingArguments refuses GRPOConfig's default `bf16`, and `tf32`, without
    one)."""
    from trl import GRPOConfig

    @dataclass
    class DryRunConfig(GRPOConfig):
        def __post_init__(self) -> None:
            self.use_cpu, self.bf16, self.fp16, self.tf32 = True, False, False, None
            super().__post_init__()

    return DryRunConfig


def parse_arguments(args: Sequence[str]) -> tuple[VerifierScriptArguments, GRPOConfig, ModelConfig]:
    """The command line (and its `--config` file), read by TRL's parser: first this script's own arguments, to know
    whether it is a dry run (`--check_data`), then all of them."""
    from trl import TrlParser

    own = TrlParser(cast(Any, (VerifierScriptArguments,)), prog=PROG, allow_abbrev=False)  # TRL's flags: left over
    script_args, _ = own.parse_args_and_config(args=list(args), return_remaining_strings=True)
    parsed = make_parser(dry_run=script_args.check_data).parse_args_and_config(args=list(args))
    return cast(tuple[VerifierScriptArguments, "GRPOConfig", "ModelConfig"], tuple(parsed))


# `--help`: the script's own flags, grouped, then the TRL flags most runs set. Every field of VerifierScriptArguments
# is in one group (a test checks it).
HELP_GROUPS: dict[str, tuple[str, ...]] = {
    "the verifier": ("verifier_url", "verifier_api_key", "verifier_ready_timeout", "verifier_connect_grace",
                     "max_consecutive_failures"),
    "rewards": ("reward_components", "reward_options", "combined_reward", "allow_order_inversion", "async_rewards",
                "format_prefilled", "log_timings"),
    "online reward model": ("online_rm", "online_rm_every", "online_rm_method", "online_rm_learning_rate",
                            "online_rm_epochs", "online_rm_checkpoint", "online_rm_output_dir"),
    "data": ("dataset_name", "dataset_config", "dataset_train_split", "dataset_test_split", "prompt_column",
             "solution_column", "tests_column", "options_column", "tests_in_prompt", "options_in_prompt",
             "spec_column", "dataset_shape", "sql_databases", "max_train_samples", "system_prompt", "check_data"),
}  # fmt: skip
# TRL's own flags (GRPOConfig, ModelConfig) that most runs set: name -> (metavar, help); `--help-all` lists them all.
TRL_FLAGS: dict[str, tuple[str, str]] = {
    "model_name_or_path": ("MODEL", "the model: a hub id or a local directory"),
    "output_dir": ("DIR", "where the model, checkpoints and trainer_state.json go"),
    "max_steps": ("N", "training steps (else --num_train_epochs)"),
    "per_device_train_batch_size": ("N", "completions per device per step"),
    "gradient_accumulation_steps": ("N", "steps accumulated per optimizer update"),
    "num_generations": ("N", "completions per prompt: the GRPO group"),
    "max_completion_length": ("N", "the generation cap in tokens; also overlong's and length's max_tokens"),
    "learning_rate": ("LR", "the learning rate"),
    "beta": ("BETA", "the KL coefficient (0: no reference model)"),
    "reward_weights": ("W ...", "the weight of each reward function, in order"),
    "bf16": ("BOOL", "bf16 mixed precision (a GPU); on CPU pass --use_cpu true --bf16 false"),
    "use_cpu": ("BOOL", "train on the CPU"),
    "use_vllm": ("BOOL", "generate with vLLM (with --vllm_mode colocate or server)"),
    "logging_steps": ("N", "log every N steps"),
    "log_completions": ("BOOL", "print a table of completions, rewards and verdicts at each log"),
    "report_to": ("TO", "none, wandb, trackio, tensorboard, ..."),
    "save_strategy": ("WHEN", "no, steps (every --save_steps) or epoch"),
    "resume_from_checkpoint": ("DIR", "continue from <output_dir>/checkpoint-<step>"),
    "seed": ("N", "the random seed"),
}


def _metavar(annotation: Any) -> str:
    text = str(annotation)
    if "bool" in text:
        return "BOOL"
    if "int" in text or "float" in text:
        return "N"
    return "NAME ..." if text.startswith("list") else "TEXT"


def short_help() -> str:
    """`--help`: this script's flags, grouped, and the TRL flags most runs set; no TRL import."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} --model_name_or_path MODEL --output_dir DIR [--flag VALUE ...]",
        description=__doc__.split("\n\n", 1)[0] + " Flags take a value: --combined_reward true.",
        epilog="Every flag of TRL's GRPOConfig and ModelConfig works too (--help-all lists all of them; it loads TRL, "
        "which takes a few seconds), and --config run.yaml reads the same names from a YAML file (flags on the "
        "command line win). README.md, 'Training with TRL', has a full command.",
        add_help=False,
    )
    fields = {f.name: f for f in dataclasses.fields(VerifierScriptArguments)}
    for title, names in HELP_GROUPS.items():
        group = parser.add_argument_group(title)
        for name in names:
            default = fields[name].default
            shown = "" if default is dataclasses.MISSING or default is None else f" (default: {default})"
            text = fields[name].metadata["help"].replace("%", "%%") + shown
            group.add_argument(f"--{name}", metavar=_metavar(fields[name].type), help=text)
    trl = parser.add_argument_group("training (TRL's flags; the ones most runs set)")
    for name, (metavar, text) in TRL_FLAGS.items():
        trl.add_argument(f"--{name}", metavar=metavar, help=text)
    other = parser.add_argument_group("help")
    other.add_argument("-h", "--help", action="store_true", help="this message")
    other.add_argument("--help-all", action="store_true", help="every flag, TRL's included (loads TRL)")
    return parser.format_help()


def reward_functions(
    args: VerifierScriptArguments,
    max_completion_length: int | None = None,
    reward_weights: Sequence[float] | None = None,
) -> list[Any]:
    """One reward function per component (TRL logs `rewards/verifier_<component>/mean` for each), all scored in one
    request per batch (`VerifierRewards`); or, with --combined_reward, one for all. `max_completion_length`
    (GRPOConfig's) is the `max_tokens` of overlong and length; `reward_weights` (GRPOConfig's) are the weights TRL
    gives the functions, which the verifier's order guard checks."""
    components = args.reward_components
    if len(set(components)) != len(components):
        raise ValueError(f"--reward_components names a component twice: {' '.join(components)}")
    common: dict[str, Any] = {
        "base_url": args.verifier_url,
        "api_key": api_key_or_env(args.verifier_api_key),
        "options": component_options(args, max_completion_length),
        "options_column": "options" if args.options_column else None,
        "spec_column": SPEC_COLUMN,  # the prepared rows' specs, when the data has any (data.to_row)
        "allow_order_inversion": args.allow_order_inversion,
        "max_consecutive_failures": args.max_consecutive_failures,
    }
    if args.combined_reward:
        kind = AsyncVerifierReward if args.async_rewards else VerifierReward
        return [kind(components if len(components) > 1 else components[0], **common)]
    group = VerifierRewards(components, reward_weights=reward_weights, asynchronous=args.async_rewards, **common)
    return list(group.functions)


def component_options(args: VerifierScriptArguments, max_completion_length: int | None) -> dict[str, dict[str, Any]]:
    """The options the script sets (max_tokens from the generation cap, length's correctness source, format's
    prefilled tag), under the user's `--reward_options`."""
    user, components = user_options(args), args.reward_components
    options: dict[str, dict[str, Any]] = {}
    for name in ("overlong", "length"):
        if name in components:
            if max_completion_length is None:
                raise ValueError(f"{name} needs --max_completion_length (its max_tokens)")
            options[name] = {"max_tokens": max_completion_length}
    source = None
    if "length" in components:
        # length reads correctness from the first correctness component rewarded, else math (sent, not rewarded)
        source = user.get("length", {}).get("correct_from") or next((c for c in components if c in PRIMARIES), "math")
        options["length"]["correct_from"] = source
    if args.format_prefilled and "format" in components:
        options["format"] = {"prefilled": True}
    stray = sorted(set(user) - set(components) - {source})
    if stray:
        raise ValueError(f"--reward_options names components this run does not reward: {', '.join(stray)}")
    for name, values in user.items():
        options[name] = {**options.get(name, {}), **values}
    return options


def user_options(args: VerifierScriptArguments) -> dict[str, dict[str, Any]]:
    """`--reward_options`: a JSON string on the command line, a mapping in a YAML config."""
    options = args.reward_options or {}
    options = json.loads(options) if isinstance(options, str) else options
    if not isinstance(options, dict) or not all(isinstance(value, dict) for value in options.values()):
        raise ValueError('--reward_options must be a JSON object of objects: {"component": {"option": value}}')
    return options


def check_item(reward: Any) -> ScoreItem:
    """One item that asks for everything a reward function sends, with the options the run uses: the verifier must
    take it (the API key, the options, and code scoring when code is rewarded, which a math-only verifier refuses)
    before anything heavy loads. It is right for every correctness component, and short."""
    spec = reward.spec
    completion = (
        "<think>a quick check of the answer</think>The answer is \\boxed{1}.\n```python\nprint(1)\n```\n"
        "```sql\nSELECT 1\n```\n```json\n1\n```"
    )
    sent = [name for name in spec.sent if name in PLACEHOLDER_ROWS or not row_fields(name, spec.options.get(name, {}))]
    left_out = [name for name in spec.sent if name not in sent]
    if left_out:  # their specs come from the rows: the first training step checks them
        logger.info("the verifier check leaves out %s, whose specs come from the data", ", ".join(left_out))
    weights = {name: w for name, w in (spec.item_weights or {}).items() if name in sent} or None
    item = template_item(sent or ["format"], spec.options, weights, spec.allow_order_inversion, completion)
    return item.model_copy(update={"completion_tokens": 8, "truncated": False})


def check_verifier(args: VerifierScriptArguments, rewards: Sequence[Any]) -> None:
    """Wait for the verifier, then have it score one item per request the reward functions make (which checks the
    API key, the options, and that it scores those components), before anything heavy loads. Exits with a message
    naming the flag that fixes it."""
    api_key = api_key_or_env(args.verifier_api_key)
    logger.info(
        "checking the verifier at %s (--verifier_url): waiting up to %gs while it starts, %gs while nothing listens",
        args.verifier_url,
        args.verifier_ready_timeout,
        args.verifier_connect_grace,
    )
    with VerifierClient(args.verifier_url, api_key=api_key) as client:
        try:
            client.wait_until_ready(args.verifier_ready_timeout, connect_grace=args.verifier_connect_grace)
            client.score(list({id(reward.spec): check_item(reward) for reward in rewards}.values()))
        except VerifierError as exc:
            raise SystemExit(f"error: {preflight_failure(exc, args, api_key is not None)}") from exc
    logger.info("verifier ready at %s", args.verifier_url)


def preflight_failure(error: VerifierError, args: VerifierScriptArguments, key_given: bool) -> str:
    """What went wrong before training, and which flag fixes it."""
    url = args.verifier_url
    if isinstance(error, VerifierRequestError) and error.status_code == 401:
        if key_given:
            return (
                f"the verifier at {url} refused the API key given with --verifier_api_key / VERIFIER_API_KEY "
                f"(HTTP 401: {error.detail}): pass the key the verifier was started with (its VERIFIER_API_KEY)"
            )
        return (
            f"the verifier at {url} requires an API key (HTTP 401: {error.detail}): pass it with "
            "--verifier_api_key or set the VERIFIER_API_KEY environment variable"
        )
    if isinstance(error, VerifierRequestError) and error.status_code == 422:
        return (
            f"the verifier at {url} refuses what this run would ask of it (--reward_components "
            f"{' '.join(args.reward_components)}): {error.detail}"
        )
    if isinstance(error, VerifierNotReadyError):
        return (
            f"the verifier at --verifier_url {url} was not ready within --verifier_ready_timeout "
            f"({args.verifier_ready_timeout:g}s): {error}\nIts log says why; a larger --verifier_ready_timeout waits "
            "longer."
        )
    if isinstance(error, VerifierConnectionError):
        return (
            f"{error}\nStart the verifier (docker compose up), or pass its address with --verifier_url; "
            f"--verifier_connect_grace (now {args.verifier_connect_grace:g}s) waits longer for one that is starting."
        )
    return f"the verifier check of --verifier_url {url} failed: {error}\nIs --verifier_url the verifier's base URL?"


def main(script_args: VerifierScriptArguments, training_args: GRPOConfig, model_args: ModelConfig) -> None:
    from trl import GRPOTrainer, get_peft_config

    try:  # the reward functions check their options, before anything waits or loads
        rewards = reward_functions(script_args, training_args.max_completion_length, training_args.reward_weights)
    except (ValueError, TypeError) as exc:
        raise SystemExit(f"error: --reward_components / --reward_options: {exc}") from exc
    check_verifier(script_args, rewards)
    if script_args.dataset_name is None:
        raise ValueError("--dataset_name is required (a hub id such as openai/gsm8k, or a local .json/.jsonl file)")
    columns = Columns(
        script_args.prompt_column,
        script_args.solution_column,
        script_args.tests_column,
        script_args.options_column,
        script_args.spec_column,
    )
    try:  # a column the run needs and the dataset lacks, a row with no usable gold: one line, not a traceback
        dataset = load_prompts(
            script_args.dataset_name,
            script_args.dataset_config,
            columns=columns,
            components=list(dict.fromkeys(name for reward in rewards for name in reward.spec.sent)),
            system_prompt=script_args.system_prompt,
            tests_in_prompt=script_args.tests_in_prompt,
            options_in_prompt=script_args.options_in_prompt,
            dataset_shape=script_args.dataset_shape,
            options=rewards[0].spec.options,
            sql_databases=script_args.sql_databases,
        )
    except ValueError as exc:
        raise SystemExit(f"error: {script_args.dataset_name}: {exc}") from exc
    train_dataset = dataset[script_args.dataset_train_split]
    if script_args.max_train_samples is not None:
        train_dataset = train_dataset.select(range(min(script_args.max_train_samples, len(train_dataset))))
    if script_args.check_data:
        raise SystemExit(report_data(script_args, columns, rewards, list(train_dataset)))
    eval_dataset = dataset[script_args.dataset_test_split] if training_args.eval_strategy != "no" else None

    model_init_kwargs = {
        "revision": model_args.model_revision,
        # TRL moved trust_remote_code from ModelConfig (<= 1.x early) to GRPOConfig; take it from whichever has it
        "trust_remote_code": getattr(
            training_args, "trust_remote_code", getattr(model_args, "trust_remote_code", False)
        ),
        "attn_implementation": model_args.attn_implementation,
        "dtype": model_args.dtype,
    }
    if isinstance(training_args.model_init_kwargs, dict):  # the user's --model_init_kwargs win
        model_init_kwargs |= training_args.model_init_kwargs
    training_args.model_init_kwargs = model_init_kwargs

    if model_args.model_name_or_path is None:
        raise ValueError("--model_name_or_path is required (a hub id or a local model directory)")
    trainer = GRPOTrainer(
        model=model_args.model_name_or_path,
        reward_funcs=rewards,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        peft_config=get_peft_config(model_args),
        callbacks=[online_reward_model(script_args, rewards, training_args.output_dir)]
        if script_args.online_rm
        else None,
    )
    if script_args.log_timings and not log_timings(trainer):
        logger.warning("--log_timings: this TRL has no timed blocks where the script looks; no timing/ metrics")
    eos_token_ids, pad_token_id = stop_token_ids(trainer)  # the tokenizer TRL loaded, and its generation config's
    for reward in rewards:
        reward.set_token_ids(eos_token_ids, pad_token_id)
    try:
        trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    except VerifierUnavailableError as exc:
        if trainer.state.global_step == 0:  # no step done: nothing worth keeping
            raise
        raise SystemExit(f"error: {stopped_without_verifier(trainer, exc)}") from exc
    trainer.save_model(training_args.output_dir)
    trainer.save_state()  # trainer_state.json: the logged rewards and verifier metrics of every step
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=script_args.dataset_name)
    if hasattr(trainer, "end"):  # transformers >= 5.18: finish the trackers, end the process group
        trainer.end()
    print(done_line(trainer.state.global_step, trainer.state.log_history, script_args.verifier_url,
                    training_args.output_dir), flush=True)  # fmt: skip


def online_reward_model(args: VerifierScriptArguments, rewards: Sequence[Any], output_dir: str | None) -> Any:
    """`--online_rm`: the callback that updates the verifier's reward model from the rule outcomes of the rewards."""
    from trainer_client.online_rm import OnlineRewardModel

    assert args.online_rm is not None
    spec = rewards[0].spec  # every function of the run sends the same components
    outcome_from = spec.correctness or next((name for name in spec.sent if name in PRIMARIES), None)
    if outcome_from is None:
        raise SystemExit("error: --online_rm trains on rule outcomes: --reward_components needs one of "
                         f"{', '.join(PRIMARIES)}")  # fmt: skip
    checkpoint = args.online_rm_checkpoint
    with VerifierClient(args.verifier_url, api_key=api_key_or_env(args.verifier_api_key)) as client:
        served = next((model for model in client.models()["models"] if model["name"] == args.online_rm), None)
    if served is None:
        raise SystemExit(f"error: --online_rm: the verifier at {args.verifier_url} serves no model of that name "
                         "(GET /v1/models lists them; VERIFIER_MODELS sets them)")  # fmt: skip
    if served.get("backend", "local") != "local":  # the verifier would refuse each reload (422) after each training
        raise SystemExit(f"error: --online_rm: the verifier's model is served by an engine ({served['backend']}), "
                         "which the verifier cannot reload; only the models it loads are trained online")  # fmt: skip
    if served["kind"] == "rm" and args.online_rm_method not in ("pairs", "outcome"):  # prm_outcome: a token classifier
        raise SystemExit("error: --online_rm_method: the verifier's model is of kind rm; train it with pairs or "
                         "outcome")  # fmt: skip
    # a process reward model (kind prm, prm_lm) learns step labels made from the outcome, whatever
    # --online_rm_method says, in the layout the run's prm component reads it with
    method = "prm_outcome" if served["kind"] in ("prm", "prm_lm") else args.online_rm_method
    online = OnlineRewardModel(
        args.online_rm,
        checkpoint=checkpoint or served["path"],
        output_dir=Path(args.online_rm_output_dir or Path(output_dir or ".") / "rm").resolve(),
        every_steps=args.online_rm_every,
        outcome_from=outcome_from,
        method=cast(Any, method),
        learning_rate=args.online_rm_learning_rate,
        epochs=args.online_rm_epochs,
        **(prm_reading(args, served["kind"]) if method == "prm_outcome" else {}),
        base_url=args.verifier_url,
        api_key=api_key_or_env(args.verifier_api_key),
    )
    scorer = getattr(getattr(rewards[0], "group", None), "scorer", rewards[0])  # a VerifierRewards group's request
    online.observe(scorer)
    return online


def prm_reading(args: VerifierScriptArguments, kind: str) -> dict[str, Any]:
    """How the run's prm component reads the --online_rm model (its --reward_options, when they name the model):
    layout, separator, aggregate and step_tag's tokens, which the update trains and evaluates in; by default the
    prm component's (trl for kind prm, step_tag for prm_lm)."""
    options = user_options(args).get("prm", {})
    if options.get("model") != args.online_rm:  # the component reads another model, or none: its defaults
        options = {}
    fields = ("layout", "separator", "aggregate", "step_tag", "good_token", "bad_token")
    reading = {name: options[name] for name in fields if name in options}
    reading.setdefault("layout", "step_tag" if kind == "prm_lm" else "trl")
    if (reading["layout"] == "step_tag") != (kind == "prm_lm"):
        raise SystemExit(f"error: --reward_options: prm's layout {reading['layout']} does not read a model of kind "
                         f"{kind} (step_tag reads a causal LM, kind prm_lm; trl and qwen_prm kind prm)")  # fmt: skip
    return reading


def done_line(steps: int, log_history: Sequence[dict[str, Any]], url: str, output_dir: str | None) -> str:
    """The run's last line: that it finished, what the verifier's rewards were, where the results are.

    >>> line = done_line(2, [{"rewards/verifier_math/mean": 0.5}, {"rewards/verifier_math/mean": 0.0}], "U", "runs/x")
    >>> print(line.replace("; ", "\\n"))
    done: 2 GRPO steps rewarded by the verifier at U (mean reward over the logged steps: verifier_math 0.25)
    the model and trainer_state.json are in runs/x
    """
    rewards: dict[str, list[float]] = {}
    for entry in log_history:
        for key, value in entry.items():
            if key.startswith("rewards/") and key.endswith("/mean") and isinstance(value, int | float):
                rewards.setdefault(key.removeprefix("rewards/").removesuffix("/mean"), []).append(float(value))
    means = ", ".join(f"{name} {sum(values) / len(values):.3g}" for name, values in rewards.items())
    logged = f" (mean reward over the logged steps: {means})" if means else ""
    return (
        f"done: {steps} GRPO steps rewarded by the verifier at {url}{logged}; the model and trainer_state.json are "
        f"in {output_dir}"
    )


def report_data(
    args: VerifierScriptArguments, columns: Columns, rewards: Sequence[Any], rows: Sequence[dict[str, Any]]
) -> int:
    """`--check_data`: print what the run would read from the training split and how many of its gold answers and
    tests cannot be used; the exit status (1 when some cannot)."""
    spec = rewards[0].spec  # every reward function of a run sends the same components with the same options
    where = f"{args.dataset_name}, split {args.dataset_train_split}"
    with VerifierClient(args.verifier_url, api_key=api_key_or_env(args.verifier_api_key)) as client:
        mapped = bool(rows) and SPEC_COLUMN in rows[0] and args.dataset_shape != "none"
        shape = f"--dataset_shape {args.dataset_shape}" if mapped else None
        report, unusable = check_data(client, rows, columns, spec.sent, spec.options, where, shape)
    for line in report:
        print(line)
    print(
        f"data check done: {unusable} of {len(rows)} rows have a gold answer or tests the verifier cannot use; "
        "nothing was trained",
        flush=True,
    )
    return 1 if unusable else 0


def stopped_without_verifier(trainer: GRPOTrainer, error: VerifierUnavailableError) -> str:
    """Save the last completed step as the Trainer's periodic saves do (model, optimizer, scheduler, RNG and
    trainer_state.json), and say why the run stopped and how to continue it."""
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    step = trainer.state.global_step
    checkpoint = Path(trainer._get_output_dir(trial=None)) / f"{PREFIX_CHECKPOINT_DIR}-{step}"  # where it saves
    logger.warning("the verifier stayed unavailable; saving step %d to %s", step, checkpoint)
    trainer._save_checkpoint(trainer.model, trial=None)  # transformers has no public way to save a resumable one
    logger.info("checkpoint of step %d saved in %s", step, checkpoint)
    return (
        f"training stopped after step {step} of {trainer.state.max_steps}: the verifier gave no rewards ({error}). "
        f"Step {step} is saved in {checkpoint}; once the verifier answers again, run the same command with "
        f"--resume_from_checkpoint {checkpoint} to continue (a larger --max_consecutive_failures rides out longer "
        "outages)."
    )


def cli(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--help-all" in args:
        make_parser().print_help()
        return
    if "-h" in args or "--help" in args:
        print(short_help(), end="")
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per request
    main(*parse_arguments(args))


if __name__ == "__main__":
    cli(sys.argv[1:])
