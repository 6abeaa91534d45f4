"""The model runtime: loads each configured checkpoint and runs its forward passes.

- Off the event loop: one thread per device runs every model on it (a GPU runs one forward at a time anyway), so
  the loop keeps answering health checks and scoring rules while a model works. A reload loads the new checkpoint
  in a loader thread of its own, so the device's thread scores with the old version meanwhile.
- Batched under a token budget: a request's sequences are tokenized, sorted by length and cut into batches whose
  padded size is at most the model's `batch_tokens` (batching.batches). Memory is bounded by the budget, never by
  the request: 4,096 inputs of 8,000 tokens go through as many small forwards, not one (trl#4419 is GRPOTrainer's
  one forward over the whole batch).
- A deadline: the thread stops between batches once the request's time is up; what was not scored by then comes
  back as None, for the caller to report.
- A version per model (the checkpoint's files' hash): every score comes back with the version that gave it.
- Two kinds of call: `score`, a sequence-classification model's logit per input (rm); `score_steps`, a process reward
  model's score per step, read at each step's position in the layout (prm, prm_lm), through the same batching,
  deadline and failure handling. A step layout over max_tokens is not scored (too_long): cut, it would lose steps or
  shift them.

torch and transformers are imported when the runtime starts, never at import time: a service with no models does not
load them.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import hashlib
import logging
import math
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from reward_models.batching import batches
from reward_models.layout import (
    LayoutError,
    StepLayout,
    Template,
    qwen_prm_steps,
    step_tag_steps,
    tag_id,
    token_ids,
    trl_steps,
)
from reward_models.spec import ModelSpec

log = logging.getLogger(__name__)

TOKENIZE_CHUNK = 256  # inputs tokenized at a time: the tokenizer's lists of ints become compact arrays chunk by chunk
# too_long: over max_tokens; model_error: the forward or the template failed; bad_layout: the steps cannot be laid
# out for this model (a step holds its tag token, a tag is not a token of its tokenizer)
Failure = Literal["too_long", "model_error", "bad_layout"]


class ModelLoadError(RuntimeError):
    """A configured model cannot be served: the service does not start (or, on a reload, the old one stays). `public`
    says why without the path or the loader's own message (which may quote the checkpoint's files), for an HTTP
    answer; `out_of_room`: the device had no memory for it, not the checkpoint's fault."""

    def __init__(self, message: str, public: str | None = None, *, out_of_room: bool = False) -> None:
        super().__init__(message)
        self.public = public or "the checkpoint cannot be served"
        self.out_of_room = out_of_room


class ReloadBusy(RuntimeError):
    """A reload of this model is already under way."""


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


def checkpoint_version(path: str, model: Any) -> str:
    """A name for what is loaded: a local checkpoint's directory name and a hash of its files' names, sizes and times
    and of its config; a hub id and the revision it resolved to."""
    directory = Path(path)
    if not directory.is_dir():
        commit = getattr(model.config, "_commit_hash", None)
        return f"{path}@{commit[:12]}" if commit else path
    digest = hashlib.sha256()
    for file in sorted(directory.iterdir()):
        if file.is_file():
            stat = file.stat()
            digest.update(f"{file.name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    if (directory / "config.json").is_file():
        digest.update((directory / "config.json").read_bytes())
    return f"{directory.resolve().name}-{digest.hexdigest()[:12]}"


# Config fields by which a causal LM's forward changes its LM head's logits (Cohere's logit_scale, Granite's and
# HyperCLOVA X's logits_scaling, Falcon-H1's lm_head_multiplier, ...): prm_lm applies the head itself, at the tags only.
LOGIT_SCALES = ("logit_scale", "logits_scaling", "lm_head_multiplier", "output_multiplier")


def _head_not_plain(config: Any) -> str | None:
    """Why a causal LM's logits are not its bare LM head's (prm_lm reads the head at the tags), or None."""
    configs = [config]
    text = getattr(config, "get_text_config", None)
    if callable(text) and (inner := text()) is not config:
        configs.append(inner)
    for each in configs:
        if getattr(each, "final_logit_softcapping", None):
            return "kind prm_lm does not serve a model that caps its logits"
        for field in LOGIT_SCALES:
            scale = getattr(each, field, None)
            if isinstance(scale, int | float) and scale != 1:
                return f"kind prm_lm does not serve a model that scales its logits ({field})"
    return None


class LoadedModel:
    """One checkpoint in memory, with its tokenizer and the settings its inputs are cut to. Built in its device's
    thread at start or in the loader thread on a reload, then used from its device's thread only."""

    def __init__(self, name: str, spec: ModelSpec) -> None:
        import torch
        from transformers import (
            AutoModelForCausalLM,
            AutoModelForSequenceClassification,
            AutoModelForTokenClassification,
            AutoTokenizer,
        )

        self.name, self.spec, self.torch = name, spec, torch
        if spec.device.startswith("cuda") and not torch.cuda.is_available():
            raise ModelLoadError(f"VERIFIER_MODELS: model {name!r}: device {spec.device!r}, but no GPU is available")
        auto = {
            "rm": AutoModelForSequenceClassification,
            "prm": AutoModelForTokenClassification,
            "prm_lm": AutoModelForCausalLM,
        }[spec.kind]
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(spec.path)
            model = auto.from_pretrained(spec.path, dtype=spec.dtype).to(spec.device)
        except Exception as exc:  # a missing or broken checkpoint, an unknown architecture, no room on the device
            detail = f"{type(exc).__name__}: {exc}"
            room = isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"  # torch.cuda's
            public = f"the checkpoint cannot be loaded ({type(exc).__name__})"
            raise ModelLoadError(
                f"VERIFIER_MODELS: model {name!r}: cannot load {spec.path!r}: {detail}", public, out_of_room=room
            ) from None
        self.model = model.eval()
        config = self.model.config
        if spec.kind == "rm" and config.num_labels != 1:
            why = f"kind rm needs a sequence-classification model with num_labels 1, this one has {config.num_labels}"
            raise ModelLoadError(f"VERIFIER_MODELS: model {name!r}: {why} (RewardTrainer's)", why)
        if spec.kind == "prm" and config.num_labels != 2:
            why = f"kind prm needs a token-classification model with num_labels 2, this one has {config.num_labels}"
            raise ModelLoadError(f"VERIFIER_MODELS: model {name!r}: {why} (PRMTrainer's)", why)
        if spec.kind == "prm_lm" and (head := _head_not_plain(config)):  # read at the tags from the bare LM head
            raise ModelLoadError(f"VERIFIER_MODELS: model {name!r}: {head}", head)
        pad = config.pad_token_id
        if spec.kind != "rm":  # each step is read at its own position: padding is never read, any id does
            pad = next((i for i in (pad, self.tokenizer.pad_token_id, self.tokenizer.eos_token_id) if i is not None), 0)
        if pad is None:  # transformers cannot find the last real token of a padded row without it
            why = "its config has no pad_token_id"
            raise ModelLoadError(
                f"VERIFIER_MODELS: model {name!r}: {why} (RewardTrainer sets it; set config.pad_token_id, e.g. to the "
                "EOS id, and save it)",
                why,
            )
        self.pad_id = int(pad)
        max_tokens = spec.max_tokens or getattr(config, "max_position_embeddings", None)
        if max_tokens is None:
            why = "set max_tokens (its config gives no length)"
            raise ModelLoadError(f"VERIFIER_MODELS: model {name!r}: {why}", why)
        self.max_tokens = int(max_tokens)
        if self.max_tokens > spec.batch_tokens:
            why = (
                f"batch_tokens ({spec.batch_tokens}) must be at least max_tokens ({self.max_tokens}, the model's "
                "max_position_embeddings unless set)"
            )
            raise ModelLoadError(f"VERIFIER_MODELS: model {name!r}: {why}", why)
        try:
            self.version = checkpoint_version(spec.path, self.model)
        except OSError as exc:  # the checkpoint's files changed or became unreadable while it loaded
            why = f"the checkpoint's files cannot be read ({type(exc).__name__})"
            raise ModelLoadError(f"VERIFIER_MODELS: model {name!r}: {why}: {exc}", why) from None

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
        order = list(rows)
        for batch in batches([len(rows[index]) for index in order], self.spec.batch_tokens):
            if stop.is_set():
                return
            self._forward([order[position] for position in batch], tokens, out, stop, read)

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
        input costs only itself; those alone stop too once `stop` is set (a broken device fails each input in turn)."""
        try:
            outcomes = read(batch)
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

    def _padded(self, rows: Sequence[array.array[int]]) -> tuple[Any, Any]:
        """The rows right-padded into one batch, and its attention mask, on the model's device."""
        torch = self.torch
        width = max(len(row) for row in rows)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for position, row in enumerate(rows):
            input_ids[position, : len(row)] = torch.frombuffer(row, dtype=torch.int64)
            mask[position, : len(row)] = 1
        return input_ids.to(self.model.device), mask.to(self.model.device)

    def logits(self, rows: Sequence[array.array[int]]) -> list[float]:
        """The score of each row: right-padded into one batch, the first logit at the last token that is not padding
        (transformers' sequence-classification models find it themselves, from pad_token_id)."""
        input_ids, mask = self._padded(rows)
        with self.torch.inference_mode():
            output = self.model(input_ids=input_ids, attention_mask=mask)
        return [float(value) for value in output.logits[:, 0].float().cpu().tolist()]

    # --- process reward models: a score per step ---------------------------------------------------------------

    def score_steps(self, inputs: Sequence[PrmInput], stop: threading.Event, out: dict[int, Outcome]) -> None:
        """Put each input's step scores into `out` as its batch finishes; stop between batches once `stop` is set."""
        rows: dict[int, array.array[int]] = {}
        tokens: dict[int, int] = {}
        reads: dict[int, tuple[list[int], tuple[int, int] | None]] = {}  # positions; (good, bad) ids for prm_lm
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
        if item.layout == "trl":
            return (*trl_steps(self.tokenizer, item.prompt, item.steps, item.separator), None)
        if item.layout == "qwen_prm":
            return (*qwen_prm_steps(self.tokenizer, item.prompt, item.steps), None)
        ids, positions = step_tag_steps(self.tokenizer, item.prompt, item.steps, item.separator, item.step_tag)
        return ids, positions, (tag_id(self.tokenizer, item.good_token), tag_id(self.tokenizer, item.bad_token))

    def _step_outcomes(
        self,
        batch: list[int],
        rows: dict[int, array.array[int]],
        tokens: dict[int, int],
        reads: dict[int, tuple[list[int], tuple[int, int] | None]],
    ) -> list[Outcome]:
        found = self.step_scores([rows[index] for index in batch], [reads[index] for index in batch])
        outcomes = []
        for index, scores in zip(batch, found, strict=True):
            good = all(math.isfinite(score) for score in scores)
            outcomes.append(Outcome(None, None, tokens[index], tuple(scores)) if good else
                            Outcome(None, "model_error", tokens[index]))  # fmt: skip
        return outcomes

    def step_scores(
        self, rows: Sequence[array.array[int]], reads: Sequence[tuple[list[int], tuple[int, int] | None]]
    ) -> list[list[float]]:
        """Each row's step scores, from one forward over the right-padded batch (a causal model's position never sees
        the padding after it): a token-classification model's softmax over its two labels, label 1, at each step's
        position; a causal LM's softmax over the logits of the good and the bad token, the good one, there (its LM
        head applied at those positions only: the whole vocabulary at every position would not fit)."""
        torch = self.torch
        input_ids, mask = self._padded(rows)
        with torch.inference_mode():
            if self.spec.kind == "prm":
                logits = self.model(input_ids=input_ids, attention_mask=mask).logits
                chosen = [logits[row, positions].float().softmax(-1)[:, 1] for row, (positions, _) in enumerate(reads)]
            else:
                hidden = self.model.base_model(input_ids=input_ids, attention_mask=mask).last_hidden_state
                head = self.model.get_output_embeddings()
                chosen = []
                for row, (positions, candidates) in enumerate(reads):
                    assert candidates is not None
                    at_tags = head(hidden[row, positions])[:, list(candidates)]
                    chosen.append(at_tags.float().softmax(-1)[:, 0])
        return [[float(value) for value in scores.cpu().tolist()] for scores in chosen]


def _give_back_cache(thread: ThreadPoolExecutor, torch: Any) -> None:
    """Once a reloaded-away model is freed: its GPU blocks back to the driver, from the device's thread (the call
    waits for the device, which the event loop must not)."""
    with contextlib.suppress(RuntimeError):  # the runtime has closed: its threads are gone, and the need with them
        thread.submit(torch.cuda.empty_cache)


class ModelRuntime:
    """Every configured model, loaded at `start`, each run in its device's thread."""

    def __init__(self, specs: Mapping[str, ModelSpec]) -> None:
        self.specs = dict(specs)
        self._models: dict[str, LoadedModel] = {}
        self._threads: dict[str, ThreadPoolExecutor] = {}
        self._stops: set[threading.Event] = set()
        self._reloading: set[str] = set()
        self._previous: dict[str, str] = {}  # name -> the version it served before its last reload changed it
        self._loader: ThreadPoolExecutor | None = None  # reloads load here, off the devices' threads
        self._closed = False

    def _thread(self, device: str) -> ThreadPoolExecutor:
        key = "cuda:0" if device == "cuda" else device
        if key not in self._threads:
            self._threads[key] = ThreadPoolExecutor(1, thread_name_prefix=f"model-{key}")
        return self._threads[key]

    async def start(self) -> None:
        """Load every model, each in its device's thread; the first that cannot be loaded stops the start."""
        loop = asyncio.get_running_loop()
        names = list(self.specs)
        loads = [
            loop.run_in_executor(self._thread(self.specs[name].device), LoadedModel, name, self.specs[name])
            for name in names
        ]
        loaded = await asyncio.gather(*loads)
        self._models = dict(zip(names, loaded, strict=True))
        for name, model in self._models.items():
            log.info("model %s loaded: %s on %s, version %s", name, model.spec.path, model.spec.device, model.version)

    async def reload(self, name: str, path: str) -> tuple[str, str]:
        """Load `path` as model `name` beside the version serving now, in the runtime's loader thread (so the device's
        thread goes on scoring with the old version meanwhile), and swap once it has loaded (one assignment: a call
        takes its model once, and a request pins it for all its calls, so it is scored wholly by one version); return
        the previous version and the new one. Raises ReloadBusy while another reload of the model runs, and
        ModelLoadError (the old version still serving) when the new one cannot be served.

        The old version is freed when the last request that holds it finishes; on a GPU, its cached blocks are then
        given back to the driver (torch.cuda.empty_cache, in the device's thread)."""
        if name in self._reloading:
            raise ReloadBusy(name)
        self._reloading.add(name)
        try:
            spec = self.specs[name].model_copy(update={"path": path})
            thread = self._thread(spec.device)
            if self._loader is None:  # a thread per model: each model has at most one reload under way
                self._loader = ThreadPoolExecutor(len(self.specs), thread_name_prefix="model-loader")
            new = await asyncio.get_running_loop().run_in_executor(self._loader, LoadedModel, name, spec)
            if self._closed:  # closed while it loaded: nothing to serve it to
                raise ModelLoadError(f"model {name!r}: the service closed while it loaded", "the service is closing")
            old = self._models[name]
            self._models[name] = new  # the swap
        finally:
            self._reloading.discard(name)
        if old.version != new.version:
            self._previous[name] = old.version
        if spec.device.startswith("cuda"):
            weakref.finalize(old, _give_back_cache, thread, old.torch)
        log.info("model %s reloaded: %s -> %s (%s)", name, old.version, new.version, path)
        return old.version, new.version

    def previous_version(self, name: str) -> str | None:
        """The version the model served before the last reload that changed it; None if none did."""
        return self._previous.get(name)

    async def close(self) -> None:
        self._closed = True
        for stop in self._stops:
            stop.set()
        threads, self._threads = list(self._threads.values()), {}
        if self._loader is not None:
            threads.append(self._loader)
        await asyncio.gather(*(asyncio.to_thread(thread.shutdown, True, cancel_futures=True) for thread in threads))
        self._models = {}

    @property
    def ready(self) -> bool:
        return len(self._models) == len(self.specs)

    def kind(self, name: str) -> str | None:
        spec = self.specs.get(name)
        return spec.kind if spec is not None else None

    def status(self) -> dict[str, dict[str, Any]]:
        """Each model: loaded or not, its device and version (what /readyz and GET /v1/models show)."""
        shown = {}
        for name, configured in self.specs.items():
            model = self._models.get(name)
            spec = model.spec if model is not None else configured  # after a reload: the path it was reloaded from
            shown[name] = {
                "kind": spec.kind,
                "path": spec.path,
                "device": spec.device,
                "loaded": model is not None,
                "version": model.version if model is not None else None,
                "reloading": name in self._reloading,
            }
        return shown

    def pin(self, name: str) -> LoadedModel:
        """The version of the model serving now, for a caller that makes several calls and wants them all scored by
        it (a request's two rounds): pass it back as `model`. Holding it keeps it in memory past a reload."""
        return self._models[name]

    async def score(
        self, name: str, inputs: Sequence[RmInput], deadline: float, model: LoadedModel | None = None
    ) -> tuple[str, list[Outcome | None]]:
        """The model's version and an outcome per input, scored by the loop time `deadline`; None for an input not
        scored by then (the thread stops after the batch it is running). `model`: a version `pin` gave, else the
        one serving now."""
        model = model or self._models[name]  # this call is scored by this version, whatever happens meanwhile
        return await self._call(model, model.score, inputs, deadline)

    async def score_steps(
        self, name: str, inputs: Sequence[PrmInput], deadline: float, model: LoadedModel | None = None
    ) -> tuple[str, list[Outcome | None]]:
        """As `score`, for a process reward model: each outcome has its steps' scores."""
        model = model or self._models[name]
        return await self._call(model, model.score_steps, inputs, deadline)

    async def _call(
        self,
        model: LoadedModel,
        method: Callable[[Any, threading.Event, dict[int, Outcome]], None],
        inputs: Sequence[Any],
        deadline: float,
    ) -> tuple[str, list[Outcome | None]]:
        name = model.name
        loop = asyncio.get_running_loop()
        stop, out = threading.Event(), dict[int, Outcome]()
        self._stops.add(stop)
        work = loop.run_in_executor(self._thread(model.spec.device), method, inputs, stop, out)
        try:
            await asyncio.wait_for(asyncio.shield(work), max(0.0, deadline - loop.time()))
        except TimeoutError:
            pass
        except Exception:
            log.exception("model %s: scoring failed", name)
            out = {index: out.get(index, Outcome(None, "model_error")) for index in range(len(inputs))}
        finally:
            stop.set()
            self._stops.discard(stop)
        done = dict(out)  # a copy: the thread may still be finishing a batch
        return model.version, [done.get(index) for index in range(len(inputs))]
