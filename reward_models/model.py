"""What every served model does, wherever its forward passes run: its inputs laid out and tokenized as it was trained
(layout.py), cut to max_tokens by the same rules, sorted by length and cut into batches under its token budget
(batching.py), each batch's outcomes read from its logits. A backend (runtime.BACKENDS) gives only the forward:
`logits` (rm) and `step_scores` (prm) over a batch of token-id rows: transformers in the service (runtime.LoadedModel)
or an engine's server (remote.py). So a model an engine serves sees exactly the ids a local one would."""

from __future__ import annotations

import array
import copy
import logging
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from reward_models.batching import batches
from reward_models.layout import (
    LayoutError,
    StepLayout,
    Template,
    step_layout,
    tag_id,
    token_ids,
)
from reward_models.spec import ModelSpec

log = logging.getLogger("reward_models.runtime")

TOKENIZE_CHUNK = 256  # inputs tokenized at a time: the tokenizer's lists of ints become compact arrays chunk by chunk
# too_long: over max_tokens; model_error: the forward or the template failed; bad_layout: the steps cannot be laid
# out for this model (a step holds its tag token, a tag is not a token of its tokenizer)
Failure = Literal["too_long", "model_error", "bad_layout"]
Reads = tuple[list[int], tuple[int, int] | None]  # a row's step positions; (good, bad) ids for prm_lm


class ModelLoadError(RuntimeError):
    """A configured model cannot be served: the service does not start (or, on a reload, the old one stays). `public`
    says why without the path or the loader's own message (which may quote the checkpoint's files), for an HTTP
    answer; `out_of_room`: the device had no memory for it, not the checkpoint's fault."""

    def __init__(self, message: str, public: str | None = None, *, out_of_room: bool = False) -> None:
        super().__init__(message)
        self.public = public or "the checkpoint cannot be served"
        self.out_of_room = out_of_room


class BatchFailed(RuntimeError):
    """A forward that failed for the whole batch, not for one of its inputs (an engine that cannot be reached, that
    timed out or answered garbage): each input is model_error, never retried alone (which would wait once per input)."""


@dataclass(frozen=True)
class RmInput:
    """One input to a sequence-classification model: a prompt and a completion laid out by `template`; over the
    model's max_tokens it keeps its end (`keep_end`) or is not scored."""

    template: Template
    prompt: str | None
    completion: str
    keep_end: bool = True


@dataclass(frozen=True)
class PrmInput:
    """One input to a process reward model: a prompt and the completion's steps, laid out by `layout` (reward_models/
    layout.py); the tag and the good and bad tokens are step_tag's."""

    layout: StepLayout
    prompt: str | None
    steps: tuple[str, ...]
    separator: str = "\n"
    step_tag: str = "\u043a\u0438"  # Math-Shepherd's "ки"
    good_token: str = "+"
    bad_token: str = "-"


@dataclass(frozen=True)
class Outcome:
    """A model's answer for one input: its logit (rm) or its steps' scores (prm), or why there is none."""

    logit: float | None
    failure: Failure | None = None
    tokens: int = 0  # the input's length in tokens (before it was cut to its end)
    steps: tuple[float, ...] | None = None


def load_tokenizer(name: str, spec: ModelSpec) -> Any:
    """The tokenizer in the checkpoint (or, for a model an engine serves, the directory or hub id) at `spec.path`."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(spec.path)
    except Exception as exc:  # a missing or broken directory, an unknown tokenizer
        public = f"the tokenizer cannot be loaded ({type(exc).__name__})"
        raise ModelLoadError(
            f"VERIFIER_MODELS: model {name!r}: cannot load the tokenizer of {spec.path!r}: {type(exc).__name__}: {exc}",
            public,
        ) from None


def load_policy_tokenizer(name: str, spec: ModelSpec, own: Any) -> Any:
    """The tokenizer that reads the token ids items carry: `spec.policy_tokenizer`, else a copy of the model's own
    (`own`): steps are located in a thread of their own (ModelRuntime.locate), never sharing a tokenizer object with
    the scoring thread, which tokenizes with its own settings meanwhile."""
    if spec.policy_tokenizer is None:
        return copy.deepcopy(own)
    from reward_models.tokens import load_policy_tokenizer as load

    try:
        return load(spec.policy_tokenizer)
    except Exception as exc:  # a missing or broken directory, an unknown tokenizer
        public = f"the policy tokenizer cannot be loaded ({type(exc).__name__})"
        raise ModelLoadError(
            f"VERIFIER_MODELS: model {name!r}: cannot load policy_tokenizer {spec.policy_tokenizer!r}: "
            f"{type(exc).__name__}: {exc}",
            public,
        ) from None


@dataclass(frozen=True)
class Located:
    """Where a completion's steps are in its token ids: each step's half-open range of them, or why none."""

    spans: tuple[tuple[int, int], ...] | None
    why: str | None = None


class ScoredModel:
    """A model as the runtime calls it: `score` (rm) and `score_steps` (prm) put an outcome per input into `out` as
    each batch finishes, and stop between batches once `stop` is set; `locate` finds steps in the policy's token ids.
    A backend sets `tokenizer`, `policy_tokenizer`, `max_tokens`, and `version`, and gives `logits` and
    `step_scores`."""

    name: str
    spec: ModelSpec
    tokenizer: Any
    policy_tokenizer: Any
    max_tokens: int
    version: str

    def logits(self, rows: Sequence[array.array[int]]) -> list[float]:
        """Each row's score: the first logit at its last token."""
        raise NotImplementedError

    def step_scores(self, rows: Sequence[array.array[int]], reads: Sequence[Reads]) -> list[list[float]]:
        """Each row's step scores, read at its positions."""
        raise NotImplementedError

    def status(self) -> dict[str, Any]:
        """What /readyz and GET /v1/models show of the backend beside kind, path and version."""
        return {"backend": self.spec.backend, "device": self.spec.device}

    def close(self) -> None:
        """Give back what the backend holds (connections, threads); the model is not called after."""

    def score(self, inputs: Sequence[RmInput], stop: threading.Event, out: dict[int, Outcome]) -> None:
        """Put an outcome for each input into `out` as its batch finishes; stop between batches once `stop` is set."""
        rows: dict[int, array.array[int]] = {}
        tokens: dict[int, int] = {}
        for template in ("raw", "chat"):
            indexes = [index for index, item in enumerate(inputs) if item.template == template]
            for start in range(0, len(indexes), TOKENIZE_CHUNK):
                if stop.is_set():
                    return
                self._tokenize(inputs, indexes[start : start + TOKENIZE_CHUNK], rows, tokens, out)
        self._run(rows, tokens, out, stop, lambda batch: self._rm_outcomes(batch, rows, tokens))

    def _run(
        self,
        rows: dict[int, array.array[int]],
        tokens: dict[int, int],
        out: dict[int, Outcome],
        stop: threading.Event,
        read: Callable[[list[int]], list[Outcome]],
    ) -> None:
        """The laid-out rows sorted by length and cut into forwards under the token budget, `read` over each."""
        for batch in self._batches(rows):
            if stop.is_set():
                return
            self._forward(batch, tokens, out, stop, read)

    def _batches(self, rows: dict[int, array.array[int]]) -> list[list[int]]:
        order = list(rows)
        cut = batches([len(rows[index]) for index in order], self.spec.batch_tokens)
        return [[order[position] for position in batch] for batch in cut]

    def _tokenize(
        self,
        inputs: Sequence[RmInput],
        indexes: list[int],
        rows: dict[int, array.array[int]],
        tokens: dict[int, int],
        out: dict[int, Outcome],
    ) -> None:
        template = inputs[indexes[0]].template
        try:
            ids = token_ids(self.tokenizer, template, [(inputs[i].prompt, inputs[i].completion) for i in indexes])
        except Exception:  # a template that cannot render an input: each alone, so that it costs only itself
            if len(indexes) > 1:
                for index in indexes:
                    self._tokenize(inputs, [index], rows, tokens, out)
                return
            log.exception("model %s: laying out an input failed", self.name)
            out[indexes[0]] = Outcome(None, "model_error")
            return
        for index, row in zip(indexes, ids, strict=True):
            length = len(row)
            if length == 0 or (length > self.max_tokens and not inputs[index].keep_end):
                out[index] = Outcome(None, "too_long" if length else "model_error", length)
                continue
            rows[index], tokens[index] = array.array("q", row[-self.max_tokens :]), length  # keep_end: the last ones

    def _forward(
        self,
        batch: list[int],
        tokens: dict[int, int],
        out: dict[int, Outcome],
        stop: threading.Event,
        read: Callable[[list[int]], list[Outcome]],
    ) -> None:
        """One forward over the batch (`read`); should it fail (out of memory, say), each input alone, so that one bad
        input costs only itself; those alone stop too once `stop` is set (a broken device fails each input in turn).
        A failure of the whole batch (BatchFailed) makes each input model_error at once."""
        try:
            outcomes = read(batch)
        except BatchFailed as exc:
            log.warning("model %s: a batch of %d inputs failed: %s", self.name, len(batch), exc)
            out.update((index, Outcome(None, "model_error", tokens[index])) for index in batch)
            return
        except Exception:
            if len(batch) > 1:
                for index in batch:
                    if stop.is_set():
                        return
                    self._forward([index], tokens, out, stop, read)
                return
            log.exception("model %s: the forward pass failed on an input of %d tokens", self.name, tokens[batch[0]])
            out[batch[0]] = Outcome(None, "model_error", tokens[batch[0]])
            return
        out.update(zip(batch, outcomes, strict=True))

    def _rm_outcomes(
        self, batch: list[int], rows: dict[int, array.array[int]], tokens: dict[int, int]
    ) -> list[Outcome]:
        logits = self.logits([rows[index] for index in batch])
        outcomes = []
        for index, logit in zip(batch, logits, strict=True):
            good = math.isfinite(logit)
            outcomes.append(Outcome(logit if good else None, None if good else "model_error", tokens[index]))
        return outcomes

    def locate(
        self,
        inputs: Sequence[tuple[Sequence[int], str, Sequence[tuple[int, int]]]],
        stop: threading.Event,
        out: dict[int, Located],
    ) -> None:
        """For each (ids, completion, step spans), the steps' token ranges in the ids, read with the policy's
        tokenizer (reward_models/tokens.py), or why there are none; stop once `stop` is set."""
        from reward_models.tokens import Unmapped, token_spans

        for index, (ids, text, spans) in enumerate(inputs):
            if stop.is_set():
                return
            try:
                out[index] = Located(tuple(token_spans(self.policy_tokenizer, ids, text, spans)))
            except Unmapped as exc:
                out[index] = Located(None, str(exc))
            except Exception:  # the tokenizer failed on these ids
                log.exception("model %s: locating the steps in the token ids failed", self.name)
                out[index] = Located(None, "the policy tokenizer failed on the token ids")

    # --- process reward models: a score per step ---------------------------------------------------------------

    def score_steps(self, inputs: Sequence[PrmInput], stop: threading.Event, out: dict[int, Outcome]) -> None:
        """Put each input's step scores into `out` as its batch finishes; stop between batches once `stop` is set."""
        rows: dict[int, array.array[int]] = {}
        tokens: dict[int, int] = {}
        reads: dict[int, Reads] = {}
        for index, item in enumerate(inputs):
            if index % TOKENIZE_CHUNK == 0 and stop.is_set():
                return
            try:
                ids, positions, candidates = self._step_layout(item)
            except LayoutError as exc:
                log.info("model %s: an input cannot be laid out: %s", self.name, exc)
                out[index] = Outcome(None, "bad_layout")
                continue
            except Exception:  # a template that cannot render the input
                log.exception("model %s: laying out an input failed", self.name)
                out[index] = Outcome(None, "model_error")
                continue
            if len(ids) > self.max_tokens:  # never cut: the steps past the cut, or all of them, would be lost
                out[index] = Outcome(None, "too_long", len(ids))
                continue
            rows[index], tokens[index], reads[index] = array.array("q", ids), len(ids), (positions, candidates)
        self._run(rows, tokens, out, stop, lambda batch: self._step_outcomes(batch, rows, tokens, reads))

    def _step_layout(self, item: PrmInput) -> tuple[list[int], list[int], tuple[int, int] | None]:
        """The input's ids, each step's position, and for prm_lm the ids of the good and bad tokens."""
        if (item.layout == "step_tag") != (self.spec.kind == "prm_lm"):  # the request was checked: not reached
            raise LayoutError(f"layout {item.layout} does not fit a model of kind {self.spec.kind}")
        ids, positions = step_layout(
            self.tokenizer, item.layout, item.prompt, item.steps, item.separator, item.step_tag
        )
        if item.layout != "step_tag":
            return ids, positions, None
        return ids, positions, (tag_id(self.tokenizer, item.good_token), tag_id(self.tokenizer, item.bad_token))

    def _step_outcomes(
        self,
        batch: list[int],
        rows: dict[int, array.array[int]],
        tokens: dict[int, int],
        reads: dict[int, Reads],
    ) -> list[Outcome]:
        found = self.step_scores([rows[index] for index in batch], [reads[index] for index in batch])
        outcomes = []
        for index, scores in zip(batch, found, strict=True):
            good = all(math.isfinite(score) for score in scores)
            outcomes.append(Outcome(None, None, tokens[index], tuple(scores)) if good else
                            Outcome(None, "model_error", tokens[index]))  # fmt: skip
        return outcomes
