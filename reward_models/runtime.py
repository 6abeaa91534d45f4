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

A model may instead be served by an engine's server (vLLM, SGLang): `BACKENDS` picks how each model is built from
its spec's `backend`, and the runtime calls every model alike (model.ScoredModel; remote.py for the engines).

torch and transformers are imported when the runtime starts, never at import time: a service with no models does not
load them.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import hashlib
import logging
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from reward_models.model import (
    TOKENIZE_CHUNK,
    BatchFailed,
    Failure,
    Located,
    ModelLoadError,
    Outcome,
    PrmInput,
    Reads,
    RmInput,
    ScoredModel,
    load_policy_tokenizer,
)
from reward_models.spec import ModelSpec, shown_url

__all__ = [
    "BACKENDS",
    "TOKENIZE_CHUNK",
    "BatchFailed",
    "Failure",
    "LoadedModel",
    "Located",
    "ModelLoadError",
    "ModelRuntime",
    "Outcome",
    "PrmInput",
    "ReloadBusy",
    "ReloadRefused",
    "RmInput",
    "ScoredModel",
]

log = logging.getLogger(__name__)


class ReloadBusy(RuntimeError):
    """A reload of this model is already under way."""


class ReloadRefused(RuntimeError):
    """A model this service does not load itself (an engine serves it): its weights are reloaded on the engine."""


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


def device_key(device: str) -> str:
    return "cuda:0" if device == "cuda" else device


class LoadedModel(ScoredModel):
    """One checkpoint in memory (backend local: transformers), with its tokenizer and the settings its inputs are cut
    to. Built in its device's thread at start or in the loader thread on a reload, then used from its device's thread
    only."""

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
            model, loading = auto.from_pretrained(spec.path, dtype=spec.dtype, output_loading_info=True)
            model = model.to(spec.device)
        except Exception as exc:  # a missing or broken checkpoint, an unknown architecture, no room on the device
            detail = f"{type(exc).__name__}: {exc}"
            room = isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"  # torch.cuda's
            public = f"the checkpoint cannot be loaded ({type(exc).__name__})"
            raise ModelLoadError(
                f"VERIFIER_MODELS: model {name!r}: cannot load {spec.path!r}: {detail}", public, out_of_room=room
            ) from None
        self.model = model.eval()
        self.policy_tokenizer = load_policy_tokenizer(name, spec, self.tokenizer)
        config = self.model.config
        if spec.kind == "rm" and config.num_labels != 1:
            why = f"kind rm needs a sequence-classification model with num_labels 1, this one has {config.num_labels}"
            raise ModelLoadError(f"VERIFIER_MODELS: model {name!r}: {why} (RewardTrainer's)", why)
        if spec.kind == "prm" and config.num_labels != 2:
            why = f"kind prm needs a token-classification model with num_labels 2, this one has {config.num_labels}"
            raise ModelLoadError(f"VERIFIER_MODELS: model {name!r}: {why} (PRMTrainer's)", why)
        if spec.kind == "prm_lm" and (head := _head_not_plain(config)):  # read at the tags from the bare LM head
            raise ModelLoadError(f"VERIFIER_MODELS: model {name!r}: {head}", head)
        mismatched = [key if isinstance(key, str) else key[0] for key in loading.get("mismatched_keys", ())]
        if drawn := sorted({*loading.get("missing_keys", ()), *mismatched}):
            # transformers draws these at random and carries on: a causal LM named as kind rm gets a random score
            # head, a checkpoint with a head of another shape (Qwen2.5-Math-PRM's two layers) too; its scores mean
            # nothing, so it is refused rather than served.
            shown = ", ".join(drawn[:4]) + (f" and {len(drawn) - 4} more" if len(drawn) > 4 else "")
            why = (
                f"the checkpoint has no weights for {shown}, which kind {spec.kind} reads "
                f"({auto.__name__} would draw them at random)"
            )
            raise ModelLoadError(f"VERIFIER_MODELS: model {name!r}: {why}", why)
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

    def step_scores(self, rows: Sequence[array.array[int]], reads: Sequence[Reads]) -> list[list[float]]:
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


def _remote(name: str, spec: ModelSpec) -> ScoredModel:
    from reward_models.remote import REMOTE_MODELS  # imports httpx only when an engine serves a model

    return REMOTE_MODELS[spec.backend](name, spec)


# Backend (ModelSpec.backend) -> how a model of it is built, in its place's thread: the runtime calls every model
# alike (ScoredModel), whatever runs its forward passes.
BACKENDS: dict[str, Callable[[str, ModelSpec], ScoredModel]] = {
    "local": LoadedModel,
    "vllm": _remote,
    "sglang": _remote,
}


def import_model_code() -> None:
    """transformers' names, resolved once before models load in several threads at once: its lazy module's first
    imports are not safe across threads (a name can be missing in one thread while another imports it)."""
    import transformers

    transformers.AutoTokenizer  # noqa: B018 - resolves the lazy names the loaders use
    transformers.AutoModelForSequenceClassification  # noqa: B018
    transformers.AutoModelForTokenClassification  # noqa: B018
    transformers.AutoModelForCausalLM  # noqa: B018


def place_of(name: str, spec: ModelSpec) -> tuple[str, int]:
    """The pool a model's calls run in and its threads: a device's one thread (a device runs one forward at a time),
    or for a model an engine serves, its own pool of max_concurrency threads (each call waits on the engine)."""
    if spec.remote:
        return f"remote-{name}", spec.max_concurrency
    return device_key(spec.device), 1


def where(spec: ModelSpec) -> str:
    """Where a model's forwards run, for the log: its device, or its engine and URL (without credentials).

    >>> where(ModelSpec(path="/m", device="cuda:1"))
    'on cuda:1'
    >>> where(ModelSpec(path="/m", backend="vllm", url="http://u:secret@gpu-3:8000", max_tokens=8))
    '(its tokenizer), served by vllm at http://gpu-3:8000'
    """
    if spec.remote:
        return f"(its tokenizer), served by {spec.backend} at {shown_url(spec.url or '')}"
    return f"on {spec.device}"


class ModelRuntime:
    """Every configured model, loaded at `start`, each run in its place's thread (place_of)."""

    def __init__(self, specs: Mapping[str, ModelSpec]) -> None:
        self.specs = dict(specs)
        self._models: dict[str, ScoredModel] = {}
        self._threads: dict[str, ThreadPoolExecutor] = {}
        self._locators: dict[str, ThreadPoolExecutor] = {}  # name -> the thread that locates its steps' tokens
        self._stops: set[threading.Event] = set()
        self._reloading: set[str] = set()
        self._previous: dict[str, str] = {}  # name -> the version it served before its last reload changed it
        self._loader: ThreadPoolExecutor | None = None  # reloads load here, off the devices' threads
        self._closed = False

    def _thread(self, name: str, spec: ModelSpec) -> ThreadPoolExecutor:
        key, workers = place_of(name, spec)
        if key not in self._threads:
            self._threads[key] = ThreadPoolExecutor(workers, thread_name_prefix=f"model-{key}")
        return self._threads[key]

    def _locator(self, name: str) -> ThreadPoolExecutor:
        """A thread per model for locating steps in token ids: a slow search there (a tokenizer that is not
        byte-level) never holds the device's thread, where every model on that device scores."""
        if name not in self._locators:
            self._locators[name] = ThreadPoolExecutor(1, thread_name_prefix=f"locate-{name}")
        return self._locators[name]

    async def start(self) -> None:
        """Load every model, each in its device's thread; the first that cannot be loaded stops the start."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, import_model_code)
        names = list(self.specs)
        loads = [
            loop.run_in_executor(self._thread(name, spec), BACKENDS[spec.backend], name, spec)
            for name, spec in self.specs.items()
        ]
        loaded = await asyncio.gather(*loads)
        self._models = dict(zip(names, loaded, strict=True))
        for name, model in self._models.items():
            log.info("model %s loaded: %s %s, version %s", name, model.spec.path, where(model.spec), model.version)

    async def reload(self, name: str, path: str) -> tuple[str, str]:
        """Load `path` as model `name` beside the version serving now, in the runtime's loader thread (so the device's
        thread goes on scoring with the old version meanwhile), and swap once it has loaded (one assignment: a call
        takes its model once, and a request pins it for all its calls, so it is scored wholly by one version); return
        the previous version and the new one. Raises ReloadBusy while another reload of the model runs, and
        ModelLoadError (the old version still serving) when the new one cannot be served.

        The old version is freed when the last request that holds it finishes; on a GPU, its cached blocks are then
        given back to the driver (torch.cuda.empty_cache, in the device's thread)."""
        if self.specs[name].remote:  # swapped in place on the engine, under requests in flight: no version to pin
            raise ReloadRefused(name)
        if name in self._reloading:
            raise ReloadBusy(name)
        self._reloading.add(name)
        try:
            spec = self.specs[name].model_copy(update={"path": path})
            thread = self._thread(name, spec)
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
            weakref.finalize(old, _give_back_cache, thread, self.torch_of(old))
        log.info("model %s reloaded: %s -> %s (%s)", name, old.version, new.version, path)
        return old.version, new.version

    @staticmethod
    def torch_of(model: ScoredModel) -> Any:
        assert isinstance(model, LoadedModel)  # a model reloaded here is one this service loads
        return model.torch

    def previous_version(self, name: str) -> str | None:
        """The version the model served before the last reload that changed it; None if none did."""
        return self._previous.get(name)

    async def close(self) -> None:
        self._closed = True
        for stop in self._stops:
            stop.set()
        threads, self._threads = list(self._threads.values()), {}
        threads += self._locators.values()
        self._locators = {}
        if self._loader is not None:
            threads.append(self._loader)
        await asyncio.gather(*(asyncio.to_thread(thread.shutdown, True, cancel_futures=True) for thread in threads))
        for model in self._models.values():
            model.close()
        self._models = {}

    @property
    def ready(self) -> bool:
        return len(self._models) == len(self.specs)

    def kind(self, name: str) -> str | None:
        spec = self.specs.get(name)
        return spec.kind if spec is not None else None

    def status(self) -> dict[str, dict[str, Any]]:
        """Each model: loaded or not, its backend, device (or engine's URL, without credentials, and whether it was
        reachable when last called) and version (what /readyz and GET /v1/models show)."""
        shown = {}
        for name, configured in self.specs.items():
            model = self._models.get(name)
            spec = model.spec if model is not None else configured  # after a reload: the path it was reloaded from
            backend = model.status() if model is not None else {"backend": spec.backend, "device": spec.device}
            if spec.remote:
                backend |= {"device": "remote", "url": shown_url(spec.url or "")}
            shown[name] = {
                "kind": spec.kind,
                "path": spec.path,
                **backend,
                "loaded": model is not None,
                "version": model.version if model is not None else None,
                "reloading": name in self._reloading,
            }
        return shown

    def pin(self, name: str) -> ScoredModel:
        """The version of the model serving now, for a caller that makes several calls and wants them all scored by
        it (a request's two rounds): pass it back as `model`. Holding it keeps it in memory past a reload."""
        return self._models[name]

    async def score(
        self, name: str, inputs: Sequence[RmInput], deadline: float, model: ScoredModel | None = None
    ) -> tuple[str, list[Outcome | None]]:
        """The model's version and an outcome per input, scored by the loop time `deadline`; None for an input not
        scored by then (the thread stops after the batch it is running). `model`: a version `pin` gave, else the
        one serving now."""
        model = model or self._models[name]  # this call is scored by this version, whatever happens meanwhile
        return await self._call(model, model.score, inputs, deadline)

    async def score_steps(
        self, name: str, inputs: Sequence[PrmInput], deadline: float, model: ScoredModel | None = None
    ) -> tuple[str, list[Outcome | None]]:
        """As `score`, for a process reward model: each outcome has its steps' scores."""
        model = model or self._models[name]
        return await self._call(model, model.score_steps, inputs, deadline)

    async def locate(
        self,
        model: ScoredModel,
        inputs: Sequence[tuple[Sequence[int], str, Sequence[tuple[int, int]]]],
        deadline: float,
    ) -> list[Located | None]:
        """For each (token ids, completion, step spans), the steps' token ranges, found by `model` (a version `pin`
        gave) in its thread by the loop time `deadline`; None for an input not reached by then."""
        failed = Located(None, "the policy tokenizer failed on the token ids")
        return (await self._call(model, model.locate, inputs, deadline, failed, self._locator(model.name)))[1]

    async def _call(
        self,
        model: ScoredModel,
        method: Callable[[Any, threading.Event, dict[int, Any]], None],
        inputs: Sequence[Any],
        deadline: float,
        failed: Any = None,
        thread: ThreadPoolExecutor | None = None,
    ) -> tuple[str, list[Any]]:
        """`method` over the inputs in the model's thread (or `thread`): the version and each input's answer (None:
        not reached by the deadline; `failed`, default model_error, for each input should the call itself fail)."""
        name = model.name
        failed = Outcome(None, "model_error") if failed is None else failed
        loop = asyncio.get_running_loop()
        stop, out = threading.Event(), dict[int, Any]()
        self._stops.add(stop)
        work = loop.run_in_executor(thread or self._thread(name, model.spec), method, inputs, stop, out)
        try:
            await asyncio.wait_for(asyncio.shield(work), max(0.0, deadline - loop.time()))
        except TimeoutError:
            pass
        except Exception:
            log.exception("model %s: scoring failed", name)
            out = {index: out.get(index, failed) for index in range(len(inputs))}
        finally:
            stop.set()
            self._stops.discard(stop)
        done = dict(out)  # a copy: the thread may still be finishing a batch
        return model.version, [done.get(index) for index in range(len(inputs))]
