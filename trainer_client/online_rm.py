"""A reward model kept up with the policy from the rule outcomes: the design notes' loop, and PRIME's (an implicit
PRM updated online from outcome labels), for a model the verifier serves.

`OnlineRewardModel` is a transformers `TrainerCallback` (GRPOTrainer's, or any Trainer's) that

1. keeps the rule outcomes of the last `keep_steps` steps: it observes a verifier reward function
   (`observe(reward)`), and from each call takes each completion's prompt, its text and the score of the rule
   component (`outcome_from`: math, code, ...), right from `threshold` up;
2. every `every_steps` steps fine-tunes the reward model on them, starting from the checkpoint the verifier serves:
   `method="pairs"` trains on the pairs of a right and a wrong completion to one prompt with TRL's `RewardTrainer`
   (its Bradley-Terry loss; at most `max_pairs_per_group` per prompt); `method="outcome"` is PRIME's cross-entropy of
   the score's sigmoid against the outcome, on every completion. Either way the model sees the layout it is served
   with (`template`, as the rm component lays it out, reward_models/layout.py). `method="prm_outcome"` trains a
   process reward model on step labels made from the outcome, laid out as the prm component reads them in `layout`
   (below): `trl` or `qwen_prm` for kind prm (token classification, two labels), `step_tag` for kind prm_lm (a
   causal LM read at its good and bad tokens);
3. saves it under `output_dir/step-N`, has every verifier load it (`POST /v1/models/{name}/reload`: a swap, no
   request scored by two versions), and
4. asks the verifier to evaluate the new version on held-out prompts (a fixed `held_out` share of prompts, by hash,
   is never trained on): those of the window, and the first update's again (up to `PROBE_GROUPS`), so that every
   version is compared on them: ranking accuracy within groups, AUROC against the rule outcome, calibration, the
   scores' spread, drift against the previous version (`POST /v1/models/{name}/eval`); the numbers go to TRL's logs
   as `online_rm/<metric>` next to its own (through the reward's `log_metric`), and to `history`.

It runs in the trainer's main process, between steps (as PRIME's update does): with several processes, each rank's
reward sees only its share of the batch, and rank 0's outcomes train the model.

PRM step labels from outcomes alone (`prm_outcome`): every step of a right answer is labelled good (1); of a wrong
answer only the last step is labelled bad (0), its earlier steps left out of the loss (-100). The outcome says that a
wrong answer went wrong somewhere, not where; the last step states the final answer the rule found wrong, the one step
known bad. Labelling every step of a wrong answer 0 would give one step both labels wherever a group's completions
share their first steps (GRPO's often do), and teach the model to doubt right steps. With the prm component's default
`min` aggregate (PURE's min-form credit, which holds where a sum of step rewards is hacked:
shared/research/models.md section 5) a wrong answer scores at most its last step, so that label is what lowers it; the
steps' own credit is learnt, as PRIME learns it from outcome labels only (same section), not labelled. (PRMTrainer's
`train_on_last_step_only` labelled the last step alone: section 1.) The rows are `reward_models.layout.step_layout`'s,
the function the service reads the steps with: each label where the service reads its step (trl, PRMTrainer's: the
last token of the step's separator; qwen_prm, Qwen2.5-Math-PRM's: its `<extra_0>`; step_tag, Math-Shepherd's: its
tag's last token), -100 elsewhere; a row over the model's length, or that cannot be laid out, is left out, as the
service leaves it unscored. Training is a short torch loop, as `outcome`'s is: for kind prm, the token-classification
model's own loss (cross-entropy over the labelled tokens, as transformers' Trainer would run it); for step_tag,
Math-Shepherd's objective narrowed to what the service reads, the cross-entropy over the LM head's logits of the bad
and the good token at each labelled tag (the head applied there only, as the service applies it). The evaluation
reads the model as the prm component does (`layout`, `separator`, `aggregate`, and step_tag's tokens).

    rule = VerifierReward("math", base_url=URL)
    model = VerifierReward(["math", "rm"], base_url=URL, options={"rm": {"model": "rm", "transform": "sigmoid"}},
                           weights={"math": 1.0, "rm": 0.5})
    online = OnlineRewardModel("rm", checkpoint="/models/rm", output_dir="out/rm", base_url=URL, every_steps=20)
    online.observe(rule)
    trainer = GRPOTrainer(..., reward_funcs=[rule, model], callbacks=[online])
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import random
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from transformers import TrainerCallback

from reward_models.layout import LayoutError, StepLayout, step_layout, step_spans, tag_id
from trainer_client.client import VerifierClient
from trainer_client.config import DEFAULT_URL, api_key_or_env
from trainer_client.errors import VerifierError
from verifier_service.schema import ItemResult, completion_text, prompt_text

log = logging.getLogger("trainer_client")

Method = Literal["pairs", "outcome", "prm_outcome"]
STEP_TAG = "\u043a\u0438"  # Math-Shepherd's "ки", the prm component's default step_tag
Aggregate = Literal["min", "last", "mean", "prod"]
IGNORED = -100  # a token the loss leaves out (transformers' token-classification loss ignores it)
METRIC_PREFIX = "online_rm/"
PROBE_GROUPS = 64  # held-out groups of the first update that every later evaluation scores again
EVAL_ITEMS = 2048  # completions in one evaluation at most (the verifier's VERIFIER_MAX_BATCH_ITEMS is 4096 by default)


@dataclass(frozen=True)
class Outcome:
    """One scored completion: the prompt's text, the completion's, and the rule's score."""

    step: int
    prompt: str
    completion: str
    outcome: float


@dataclass
class OutcomeLog:
    """The rule outcomes of the last `keep_steps` steps, grouped by prompt; each prompt train or held out by its hash,
    so that a prompt's completions are never on both sides."""

    keep_steps: int
    held_out: float = 0.2
    outcomes: deque[Outcome] = field(default_factory=deque)

    def add(
        self, step: int, prompts: Sequence[str], completions: Sequence[str], scores: Sequence[float | None]
    ) -> None:
        for prompt, completion, score in zip(prompts, completions, scores, strict=True):
            if score is not None and math.isfinite(score):  # an unjudged completion says nothing either way
                self.outcomes.append(Outcome(step, prompt, completion, float(score)))
        while self.outcomes and self.outcomes[0].step <= step - self.keep_steps:
            self.outcomes.popleft()

    def is_held_out(self, prompt: str) -> bool:
        """Whether `prompt` is kept for evaluation: a fixed share of prompts, by a hash of the text.

        >>> log = OutcomeLog(keep_steps=1, held_out=0.5)
        >>> sum(log.is_held_out(f"prompt {i}") for i in range(1000))
        489
        """
        digest = hashlib.sha256(prompt.encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < self.held_out

    def groups(self, held_out: bool) -> list[tuple[str, list[Outcome]]]:
        """(prompt, its outcomes, latest last) for the training prompts, or for the held-out ones."""
        found: dict[str, list[Outcome]] = {}
        for outcome in self.outcomes:
            if self.is_held_out(outcome.prompt) == held_out:
                found.setdefault(outcome.prompt, []).append(outcome)
        return list(found.items())


def pairs(
    groups: Sequence[tuple[str, Sequence[Outcome]]], threshold: float, per_group: int, rng: random.Random
) -> list[dict[str, str]]:
    """RewardTrainer's rows: for each prompt with right and wrong completions, up to `per_group` (right, wrong) pairs
    of distinct texts, drawn at random without repeats.

    >>> rows = pairs([("Q", [Outcome(0, "Q", "4", 1.0), Outcome(0, "Q", "5", 0.0)])], 1.0, 8, random.Random(0))
    >>> rows
    [{'prompt': 'Q', 'chosen': '4', 'rejected': '5'}]
    """
    rows = []
    for prompt, outcomes in groups:
        right = sorted({o.completion for o in outcomes if o.outcome >= threshold})
        wrong = sorted({o.completion for o in outcomes if o.outcome < threshold} - set(right))
        every = [(good, bad) for good in right for bad in wrong]
        for good, bad in rng.sample(every, min(per_group, len(every))):
            rows.append({"prompt": prompt, "chosen": good, "rejected": bad})
    return rows


def step_label_rows(
    tokenizer: Any,
    examples: Sequence[tuple[str, str, float]],
    separator: str,
    threshold: float,
    max_length: int,
    layout: StepLayout = "trl",
    step_tag: str = STEP_TAG,
) -> list[tuple[list[int], list[int]]]:
    """A process reward model's training rows (input ids, labels) from (prompt, completion, outcome): the completion
    split into steps as the prm component splits it, laid out by its `layout` with the function the service reads it
    with (reward_models/layout.py's `step_layout`); a right answer (outcome >= `threshold`) labelled 1 at every step's
    read position, a wrong one 0 at its last step's, every other token -100. A completion with no steps, that cannot
    be laid out (a step holds the tag) or laid out longer than `max_length`, gives no row: the service scores none."""
    rows = []
    for prompt, completion, outcome in examples:
        steps = [completion[start:end] for start, end in step_spans(completion, separator)]
        if not steps:
            continue
        try:
            ids, positions = step_layout(tokenizer, layout, prompt, steps, separator, step_tag)
        except LayoutError:
            continue
        if len(ids) > max_length:  # cut, it would lose the steps that carry the labels
            continue
        labels = [IGNORED] * len(ids)
        for position in positions if outcome >= threshold else positions[-1:]:
            labels[position] = int(outcome >= threshold)
        rows.append((ids, labels))
    return rows


class OnlineRewardModel(TrainerCallback):
    """Fine-tunes the verifier's reward model `model` from the rule outcomes every `every_steps` steps, has the
    verifier reload it and logs how it ranks held-out completions (see the module's documentation)."""

    def __init__(
        self,
        model: str,
        *,
        checkpoint: str | Path,
        output_dir: str | Path,
        every_steps: int = 10,
        keep_steps: int | None = None,
        outcome_from: str = "math",
        threshold: float = 1.0,
        method: Method = "pairs",
        template: Literal["raw", "chat"] = "raw",
        separator: str = "\n",
        aggregate: Aggregate = "min",
        layout: StepLayout = "trl",
        step_tag: str = STEP_TAG,
        good_token: str = "+",
        bad_token: str = "-",
        held_out: float = 0.2,
        max_pairs_per_group: int = 16,
        learning_rate: float = 1e-4,
        epochs: int = 1,
        batch_size: int = 8,
        max_length: int | None = None,
        device: str | None = None,
        seed: int = 0,
        base_url: str | Sequence[str] = DEFAULT_URL,
        api_key: str | None = None,
        client: VerifierClient | None = None,
    ) -> None:
        if every_steps < 1:
            raise ValueError("every_steps must be at least 1")
        if method not in ("pairs", "outcome", "prm_outcome"):
            raise ValueError('method must be "pairs", "outcome" or "prm_outcome"')
        if not 0.0 <= held_out < 1.0:
            raise ValueError("held_out must be in [0, 1)")
        if not separator:  # the steps could not be split (as the verifier refuses an empty separator)
            raise ValueError("separator must not be empty")
        if layout not in ("trl", "qwen_prm", "step_tag"):
            raise ValueError('layout must be "trl", "qwen_prm" or "step_tag"')
        if layout == "step_tag" and good_token == bad_token:  # every step would score 0.5, and nothing be learnt
            raise ValueError("good_token and bad_token must differ")
        self.model_name = model
        self.checkpoint = str(checkpoint)  # what the verifier serves now, and the next update starts from
        self.output_dir = Path(output_dir).resolve()  # the verifier reloads from an absolute path
        self.every_steps = every_steps
        self.outcome_from, self.threshold, self.method, self.template = outcome_from, threshold, method, template
        self.separator, self.aggregate = separator, aggregate  # prm_outcome: how the steps are split and made one
        self.layout, self.step_tag, self.good_token, self.bad_token = layout, step_tag, good_token, bad_token
        self.max_pairs_per_group, self.learning_rate, self.epochs = max_pairs_per_group, learning_rate, epochs
        self.batch_size, self.max_length, self.device, self.seed = batch_size, max_length, device, seed
        self.outcomes = OutcomeLog(keep_steps or every_steps, held_out)
        self.client = client or VerifierClient(base_url, api_key=api_key_or_env(api_key))
        self.step = 0
        self.metrics: dict[str, float] = {}  # the latest evaluation, as logged
        self.history: list[dict[str, Any]] = []  # one entry per update: step, checkpoint, version, evaluation
        self.probe: list[dict[str, Any]] = []  # held-out groups every evaluation includes
        self._rng = random.Random(seed)

    def observe(self, reward: Any) -> Any:
        """Keep the rule outcomes of `reward` (a `VerifierReward` or `AsyncVerifierReward` that scores
        `outcome_from`); returns it."""
        reward.add_observer(self.record)
        return reward

    def record(
        self,
        prompts: Sequence[Any] | None,
        completions: Sequence[Any],
        results: Sequence[ItemResult | None],
        kwargs: Mapping[str, Any],
    ) -> None:
        """An observer of the reward: the call's rule outcomes into the log, and the latest evaluation to TRL's."""
        if prompts is not None:
            scores = [self._outcome(result) for result in results]
            texts = [prompt_text(prompt) for prompt in prompts]
            self.outcomes.add(self.step, texts, [completion_text(c) for c in completions], scores)
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            for name, value in self.metrics.items():
                log_metric(METRIC_PREFIX + name, value)

    def _outcome(self, result: ItemResult | None) -> float | None:
        if result is None or self.outcome_from not in result.components:
            return None
        return result.components[self.outcome_from].score

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        self.step = state.global_step
        if state.global_step % self.every_steps == 0 and state.is_world_process_zero:
            self.update(state.global_step)
        return control

    def update(self, step: int) -> dict[str, Any] | None:
        """Train on the outcomes kept, save, have the verifier reload, evaluate; None when there was nothing to train
        on (no prompt with both a right and a wrong completion, for `pairs`)."""
        train = self.outcomes.groups(held_out=False)
        path = self.output_dir / f"step-{step}"
        if self.method == "pairs":
            rows = pairs(train, self.threshold, self.max_pairs_per_group, self._rng)
            if not rows:
                log.info("online reward model: step %d: no prompt with a right and a wrong answer yet", step)
                return None
            trained = self._train_pairs(rows, path)
        else:
            examples = [(prompt, o.completion, o.outcome) for prompt, outcomes in train for o in outcomes]
            train_on = self._train_steps if self.method == "prm_outcome" else self._train_outcomes
            found = train_on(examples, path) if examples else None
            if found is None:
                log.info("online reward model: step %d: no completion to train on yet", step)
                return None
            trained = found
        try:
            [answer, *_] = self.client.reload_model(self.model_name, str(path))
        except VerifierError as exc:  # training goes on with the version serving; the next update tries again
            log.warning("online reward model: step %d: the verifier did not reload %s: %s", step, path, exc)
            self.history.append({"step": step, "checkpoint": str(path), "error": str(exc), **trained})
            return None
        self.checkpoint = str(path)
        entry: dict[str, Any] = {"step": step, "checkpoint": str(path), "version": answer.get("version"), **trained}
        recent = [
            {
                "prompt": prompt,
                "completions": [o.completion for o in outcomes],
                "outcomes": [o.outcome for o in outcomes],
            }
            for prompt, outcomes in self.outcomes.groups(held_out=True)
        ]
        if not self.probe:  # the first held-out groups, kept: every version is scored on them (the eval's drift)
            self.probe = recent[:PROBE_GROUPS]
        probed = {group["prompt"] for group in self.probe}
        held = capped([*self.probe, *(group for group in recent if group["prompt"] not in probed)], EVAL_ITEMS)
        self.metrics = {k: float(v) for k, v in trained.items()}
        if held:
            try:
                options = {"correct_threshold": self.threshold, **self._reading()}
                evaluation = self.client.evaluate_model(self.model_name, held, **options)
            except VerifierError as exc:
                log.warning("online reward model: step %d: the verifier did not evaluate %s: %s", step, path, exc)
                entry["eval_error"] = str(exc)
            else:
                entry["eval"] = evaluation
                self.metrics |= numbers(evaluation)
        self.history.append(entry)
        log.info("online reward model: step %d: %s serves %s %s", step, self.model_name, path, self.metrics)
        return entry

    def _reading(self) -> dict[str, Any]:
        """How the eval reads the model: as the rm component does, or the prm component (in `layout`)."""
        if self.method != "prm_outcome":
            return {"template": self.template}
        reading = {"layout": self.layout, "separator": self.separator, "aggregate": self.aggregate}
        if self.layout == "step_tag":
            reading |= {"step_tag": self.step_tag, "good_token": self.good_token, "bad_token": self.bad_token}
        return reading

    def _load(self) -> tuple[Any, Any]:
        from transformers import (
            AutoConfig,
            AutoModelForCausalLM,
            AutoModelForSequenceClassification,
            AutoModelForTokenClassification,
            AutoTokenizer,
        )

        tokenizer = AutoTokenizer.from_pretrained(self.checkpoint)
        auto: Any = AutoModelForSequenceClassification
        if self.method == "prm_outcome":  # the head the service reads: a causal LM's (step_tag) or two labels
            auto = AutoModelForCausalLM if self.layout == "step_tag" else AutoModelForTokenClassification
            wanted = "ForCausalLM" if self.layout == "step_tag" else "ForTokenClassification"
            architectures = AutoConfig.from_pretrained(self.checkpoint).architectures or []
            if architectures and not any(name.endswith(wanted) for name in architectures):
                # loaded as the other kind, it would get a new random head, be trained so and served wrongly
                raise ValueError(
                    f"layout {self.layout} trains a model saved as *{wanted}; the checkpoint is {architectures[0]}"
                )
        model = auto.from_pretrained(self.checkpoint)
        if self.device is not None:
            model = model.to(self.device)
        return tokenizer, model

    def _max_length(self, model: Any) -> int:
        return int(self.max_length or getattr(model.config, "max_position_embeddings", None) or 1024)

    def _train_pairs(self, rows: list[dict[str, str]], path: Path) -> dict[str, float]:
        """RewardTrainer on (prompt, chosen, rejected) rows laid out as the rm component serves them."""
        from datasets import Dataset
        from trl import RewardConfig, RewardTrainer

        tokenizer, model = self._load()
        dataset: list[dict[str, Any]] = list(rows)
        if self.template == "chat":
            dataset = [
                {
                    "prompt": [{"role": "user", "content": row["prompt"]}],
                    "chosen": [{"role": "assistant", "content": row["chosen"]}],
                    "rejected": [{"role": "assistant", "content": row["rejected"]}],
                }
                for row in rows
            ]
        config = RewardConfig(
            output_dir=str(path),
            per_device_train_batch_size=self.batch_size,
            num_train_epochs=self.epochs,
            learning_rate=self.learning_rate,
            max_length=self._max_length(model),
            report_to="none",
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            seed=self.seed,
            use_cpu=(self.device or ("cuda" if _cuda() else "cpu")) == "cpu",
            **_checkpointing(RewardConfig),
        )
        trainer = RewardTrainer(
            model=model, args=config, train_dataset=Dataset.from_list(dataset), processing_class=tokenizer
        )
        result = trainer.train()
        trainer.save_model(str(path))
        tokenizer.save_pretrained(str(path))
        return {"train_pairs": float(len(rows)), "train_loss": float(result.training_loss)}

    def _train_outcomes(self, examples: list[tuple[str, str, float]], path: Path) -> dict[str, float] | None:
        """PRIME's loss: binary cross-entropy of sigmoid(score) against the outcome, on every completion, in the
        layout the rm component serves."""
        import torch

        from reward_models.layout import token_ids

        tokenizer, model = self._load()
        limit = self._max_length(model)
        ids = token_ids(tokenizer, self.template, [(prompt, completion) for prompt, completion, _ in examples])
        data = [
            (row[-limit:], min(1.0, max(0.0, outcome)))
            for row, (_, _, outcome) in zip(ids, examples, strict=True)
            if row
        ]
        if not data:
            return None
        loss_fn = torch.nn.BCEWithLogitsLoss()

        def loss(input_ids: Any, mask: Any, batch: list[tuple[list[int], float]]) -> Any:
            logits = model(input_ids=input_ids, attention_mask=mask).logits[:, 0]
            return loss_fn(logits, torch.tensor([o for _, o in batch], dtype=logits.dtype, device=logits.device))

        mean_loss = self._fit(model, data, model.config.pad_token_id, loss)
        return self._saved(model, tokenizer, path, {"train_examples": float(len(data)), "train_loss": mean_loss})

    def _train_steps(self, examples: list[tuple[str, str, float]], path: Path) -> dict[str, float] | None:
        """A process reward model on step labels made from the outcomes (`step_label_rows`, in `layout`): a
        token-classification model's own loss, cross-entropy over the labelled tokens (trl, qwen_prm); a causal LM's
        cross-entropy over its logits of the bad and the good token at each labelled tag (step_tag), the two the
        service weighs there, from its LM head as the service applies it."""
        import torch

        tokenizer, model = self._load()
        limit = self._max_length(model)
        rows = step_label_rows(tokenizer, examples, self.separator, self.threshold, limit, self.layout, self.step_tag)
        if not rows:
            return None
        pad = next(
            (i for i in (model.config.pad_token_id, tokenizer.pad_token_id, tokenizer.eos_token_id) if i is not None), 0
        )
        candidates: list[int] = []  # step_tag: the bad token's id (label 0) and the good one's (1), as the service's
        if self.layout == "step_tag":
            candidates = [tag_id(tokenizer, self.bad_token), tag_id(tokenizer, self.good_token)]
            if candidates[0] == candidates[1]:
                raise LayoutError("good_token and bad_token are the same token of this tokenizer")

        def loss(input_ids: Any, mask: Any, batch: list[tuple[list[int], list[int]]]) -> Any:
            labels = torch.full(input_ids.shape, IGNORED, dtype=torch.long)
            for position, (_, row_labels) in enumerate(batch):
                labels[position, : len(row_labels)] = torch.tensor(row_labels)
            labels = labels.to(input_ids.device)
            if self.layout != "step_tag":
                return model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
            hidden = model.base_model(input_ids=input_ids, attention_mask=mask).last_hidden_state
            read = labels != IGNORED
            logits = model.get_output_embeddings()(hidden[read])[:, candidates]
            return torch.nn.functional.cross_entropy(logits.float(), labels[read])

        mean_loss = self._fit(model, rows, pad, loss)
        labelled = float(sum(sum(label != IGNORED for label in labels) for _, labels in rows))
        trained = {"train_examples": float(len(rows)), "train_steps_labelled": labelled, "train_loss": mean_loss}
        return self._saved(model, tokenizer, path, trained)

    def _fit(self, model: Any, data: list[Any], pad: int, loss: Any) -> float:
        """`epochs` passes of AdamW over `data` ((ids, target) rows, shuffled), in right-padded batches; `loss` maps
        a batch's ids, attention mask and rows to its loss. The mean loss."""
        import torch

        optimizer = torch.optim.AdamW(model.parameters(), lr=self.learning_rate)
        model.train()
        losses: list[float] = []
        for _ in range(self.epochs):
            self._rng.shuffle(data)
            for start in range(0, len(data), self.batch_size):
                batch = data[start : start + self.batch_size]
                width = max(len(row) for row, _ in batch)
                input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for position, (row, _) in enumerate(batch):
                    input_ids[position, : len(row)] = torch.tensor(row)
                    mask[position, : len(row)] = 1
                value = loss(input_ids.to(model.device), mask.to(model.device), batch)
                optimizer.zero_grad()
                value.backward()
                optimizer.step()
                losses.append(value.item())
        model.eval()
        return sum(losses) / max(1, len(losses))

    @staticmethod
    def _saved(model: Any, tokenizer: Any, path: Path, trained: dict[str, float]) -> dict[str, float]:
        model.save_pretrained(str(path))
        tokenizer.save_pretrained(str(path))
        return trained


def capped(groups: list[dict[str, Any]], items: int) -> list[dict[str, Any]]:
    """The first groups whose completions number at most `items` in all (the eval is one request, under the
    verifier's batch limit).

    >>> groups = [{"completions": [1, 2]}, {"completions": [3]}, {"completions": [4]}]
    >>> [len(group["completions"]) for group in capped(groups, 3)]
    [2, 1]
    """
    kept, total = [], 0
    for group in groups:
        total += len(group["completions"])
        if total > items:
            break
        kept.append(group)
    return kept


def numbers(evaluation: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The evaluation's numbers, flattened into metric names (nested objects joined by '/'); others left out.

    >>> numbers({"ranking_accuracy": 0.9, "scores": {"mean": 0.1, "p50": 0.2}, "version": "v1", "drift": None})
    {'ranking_accuracy': 0.9, 'scores/mean': 0.1, 'scores/p50': 0.2}
    """
    found: dict[str, float] = {}
    for key, value in evaluation.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float) and math.isfinite(value):
            found[prefix + key] = float(value)
        elif isinstance(value, Mapping):
            found |= numbers(value, f"{prefix}{key}/")
    return found


def _checkpointing(config: type) -> dict[str, Any]:
    """RewardConfig's default activation checkpointing under transformers' new name, where it has one (the old name
    warns in transformers 5)."""
    names = {option.name: option for option in dataclasses.fields(config)}
    if "activation_checkpointing" not in names:
        return {}
    return {"activation_checkpointing": bool(names["gradient_checkpointing"].default)}


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())
