"""The model runtime: loads each configured checkpoint and runs its forward passes.

- Off the event loop: one thread per device runs every model on it (a GPU runs one forward at a time anyway), so
  the loop keeps answering health checks and scoring rules while a model works.
- Batched under a token budget: a request's sequences are tokenized, sorted by length and cut into batches whose
  padded size is at most the model's `batch_tokens` (batching.batches). Memory is bounded by the budget, never by
  the request: 4,096 inputs of 8,000 tokens go through as many small forwards, not one (trl#4419 is GRPOTrainer's
  one forward over the whole batch).
- A deadline: the thread stops between batches once the request's time is up; what was not scored by then comes
  back as None, for the caller to report.
- A version per model (the checkpoint's files' hash): every score comes back with the version that gave it.

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
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from reward_models.batching import batches
from reward_models.layout import Template, token_ids
from reward_models.spec import ModelSpec

log = logging.getLogger(__name__)

TOKENIZE_CHUNK = 256  # inputs tokenized at a time: the tokenizer's lists of ints become compact arrays chunk by chunk
Failure = Literal["too_long", "model_error"]


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
class Outcome:
    """A model's answer for one input: its logit, or why there is none."""

    logit: float | None
    failure: Failure | None = None
    tokens: int = 0  # the input's length in tokens (before it was cut to its end)


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


class LoadedModel:
    """One checkpoint in memory, with its tokenizer and the settings its inputs are cut to. Used from its device's
    thread only."""

    def __init__(self, name: str, spec: ModelSpec) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification, AutoTokenizer

        self.name, self.spec, self.torch = name, spec, torch
        if spec.device.startswith("cuda") and not torch.cuda.is_available():
            raise ModelLoadError(f"VERIFIER_MODELS: model {name!r}: device {spec.device!r}, but no GPU is available")
        auto = AutoModelForSequenceClassification if spec.kind == "rm" else AutoModelForTokenClassification
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
        if config.pad_token_id is None:  # transformers cannot find the last real token of a padded row without it
            why = "its config has no pad_token_id"
            raise ModelLoadError(
                f"VERIFIER_MODELS: model {name!r}: {why} (RewardTrainer sets it; set config.pad_token_id, e.g. to the "
                "EOS id, and save it)",
                why,
            )
        self.pad_id = int(config.pad_token_id)
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
        self.version = checkpoint_version(spec.path, self.model)

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
        order = list(rows)
        for batch in batches([len(rows[index]) for index in order], self.spec.batch_tokens):
            if stop.is_set():
                return
            self._forward([order[position] for position in batch], rows, tokens, out, stop)

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
        rows: dict[int, array.array[int]],
        tokens: dict[int, int],
        out: dict[int, Outcome],
        stop: threading.Event,
    ) -> None:
        """One forward over the batch; should it fail (out of memory, say), each input alone, so that one bad input
        costs only itself; those alone stop too once `stop` is set (a broken device fails each input in turn)."""
        try:
            logits = self.logits([rows[index] for index in batch])
        except Exception:
            if len(batch) > 1:
                for index in batch:
                    if stop.is_set():
                        return
                    self._forward([index], rows, tokens, out, stop)
                return
            log.exception("model %s: the forward pass failed on an input of %d tokens", self.name, tokens[batch[0]])
            out[batch[0]] = Outcome(None, "model_error", tokens[batch[0]])
            return
        for index, logit in zip(batch, logits, strict=True):
            good = math.isfinite(logit)
            out[index] = Outcome(logit if good else None, None if good else "model_error", tokens[index])

    def logits(self, rows: Sequence[array.array[int]]) -> list[float]:
        """The score of each row: right-padded into one batch, the first logit at the last token that is not padding
        (transformers' sequence-classification models find it themselves, from pad_token_id)."""
        torch = self.torch
        width = max(len(row) for row in rows)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for position, row in enumerate(rows):
            input_ids[position, : len(row)] = torch.frombuffer(row, dtype=torch.int64)
            mask[position, : len(row)] = 1
        device = self.model.device
        with torch.inference_mode():
            output = self.model(input_ids=input_ids.to(device), attention_mask=mask.to(device))
        return [float(value) for value in output.logits[:, 0].float().cpu().tolist()]


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
        """Load `path` as model `name` beside the version serving now, in the model's device thread, and swap once it
        has loaded (one assignment: a request takes its model once, so it is scored wholly by one version); return
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
            new = await asyncio.get_running_loop().run_in_executor(thread, LoadedModel, name, spec)
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

    async def score(self, name: str, inputs: Sequence[RmInput], deadline: float) -> tuple[str, list[Outcome | None]]:
        """The model's version and an outcome per input, scored by the loop time `deadline`; None for an input not
        scored by then (the thread stops after the batch it is running)."""
        model = self._models[name]  # this request is scored by this version, whatever happens meanwhile
        loop = asyncio.get_running_loop()
        stop, out = threading.Event(), dict[int, Outcome]()
        self._stops.add(stop)
        work = loop.run_in_executor(self._thread(model.spec.device), model.score, inputs, stop, out)
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
