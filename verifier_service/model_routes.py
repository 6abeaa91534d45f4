"""The online-update routes: `POST /v1/models/{name}/reload` and `POST /v1/models/{name}/eval`, behind the same API
key as scoring. Thin: the checks and the eval are model_update.py's, the load and the swap the model runtime's.

Statuses: 404, no such model; 409, a reload of it is under way; 413, an eval over the batch limits; 422, a body or a
path this server refuses, a checkpoint that cannot be served (the old version serves on), or an eval of a process
reward model in a layout not of its kind; 503, no memory on the device to load the new version beside the old (which
serves on). No error answer repeats the path or the loader's message (logged), which may quote the checkpoint's files
(the 200 answer shows the resolved path now serving, as GET /v1/models does).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from reward_models.runtime import ModelLoadError, ModelRuntime, ReloadBusy, ReloadRefused
from reward_models.spec import PRM_KINDS
from verifier_service.errors import CLIENT_CLOSED, invalid_request
from verifier_service.model_update import EvalMemory, PathRefused, evaluate, reload_path
from verifier_service.problems import describe
from verifier_service.resources import Models
from verifier_service.routes import SettingsDep, require_api_key, until_disconnected
from verifier_service.schema import ErrorResponse, EvalRequest, EvalResponse, ModelInfo, ReloadRequest, ReloadResponse

log = logging.getLogger(__name__)
Body = TypeVar("Body", bound=BaseModel)

router = APIRouter(dependencies=[Depends(require_api_key)])
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorResponse} for code in (401, 404, 409, 413, 422, 503)}


class Refused(Exception):
    """An answer other than 200: a status and what to say (a 422 names its field), or the answer itself."""

    def __init__(self, status: int, message: str, loc: str | None = None, answer: JSONResponse | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.loc, self.answer = status, message, loc, answer

    def response(self) -> JSONResponse:
        if self.answer is not None:
            return self.answer
        if self.status == 422:
            return invalid_request([{"loc": self.loc or "body", "msg": self.message, "type": "value_error"}], 1)
        return JSONResponse({"detail": self.message}, status_code=self.status)


def _body_of(model: type[BaseModel]) -> dict[str, Any]:
    """The request body as published: the route reads it itself (`read`), to report its errors by its own fields."""
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"required": False, "content": {"application/json": {"schema": ref}}}}


async def read(request: Request, model: type[Body]) -> Body:
    """The body (none: `{}`); one that does not validate is a 422 whose errors are located by its own fields."""
    raw = await request.body()
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        found = exc.errors(include_input=False, include_url=False)
        answer = invalid_request(describe(found, root=model), len(found))
        raise Refused(422, "invalid body", answer=answer) from None


def served(request: Request, name: str) -> ModelRuntime:
    models: Models | None = request.app.state.runtime.parts.get("models")
    if models is None or models.runtime is None or name not in models.runtime.specs:
        raise Refused(404, "no model of that name is served here (GET /v1/models lists them)")
    return models.runtime


def eval_memory(request: Request) -> EvalMemory:
    memory: EvalMemory = request.app.state.eval_memory  # made with the app (create_app)
    return memory


@router.post(
    "/v1/models/{name}/reload", responses=ERRORS, response_model=ReloadResponse, openapi_extra=_body_of(ReloadRequest)
)
async def reload_model(name: str, request: Request, settings: SettingsDep) -> Response:
    """Load a new checkpoint of the model beside the one serving and swap to it once loaded; a request is scored
    wholly by one version, and the old version is freed when its last request finishes. `/readyz` stays ready."""
    try:
        runtime = served(request, name)
        body = await read(request, ReloadRequest)
        path = checked_path(runtime, name, body.path, settings.model_roots)
        previous, _ = await load(runtime, name, path)
    except Refused as refused:
        return refused.response()
    shown = ModelInfo(name=name, **runtime.status()[name])
    answer = ReloadResponse(**shown.model_dump(), previous_version=previous)
    return Response(answer.model_dump_json(), media_type="application/json")


def checked_path(runtime: ModelRuntime, name: str, requested: str | None, roots: tuple[str, ...]) -> str:
    try:
        return reload_path(runtime.specs[name].path, requested, roots)
    except PathRefused as exc:
        raise Refused(422, str(exc), "path") from None


async def load(runtime: ModelRuntime, name: str, path: str) -> tuple[str, str]:
    try:
        return await runtime.reload(name, path)
    except ReloadRefused:
        raise Refused(
            422,
            "this model is served by an engine (url): reload its weights on the engine (vLLM: collective_rpc "
            "reload_weights; SGLang: /update_weights_from_disk); this service holds only its tokenizer",
            "name",
        ) from None
    except ReloadBusy:
        raise Refused(409, "a reload of this model is under way; send this one when it has finished") from None
    except ModelLoadError as exc:
        log.warning("reload of model %s refused, the loaded version serves on: %s", name, exc)
        if exc.out_of_room:
            raise Refused(
                503, "no memory on the device to load it beside the version serving, which serves on"
            ) from None
        raise Refused(422, f"{exc.public}; the loaded version serves on", "path") from None


@router.post(
    "/v1/models/{name}/eval", responses=ERRORS, response_model=EvalResponse, openapi_extra=_body_of(EvalRequest)
)
async def eval_model(name: str, request: Request, settings: SettingsDep) -> Response:
    """Score groups of completions with the model (an rm as the rm component does; a process reward model as the prm
    component does, its steps' aggregate) and compare the scores with their rule outcomes: ranking accuracy within
    groups, AUROC, calibration error, the scores' spread, and drift from the version before the last reload."""
    try:
        runtime = served(request, name)
        body = await read(request, EvalRequest)
        check_layout(runtime.kind(name), body.layout)
        check_eval_limits(body, settings.max_batch_items, settings.max_completion_chars)
    except Refused as refused:
        return refused.response()
    deadline = asyncio.get_running_loop().time() + settings.batch_timeout_s
    result = await until_disconnected(request, evaluate(runtime, eval_memory(request), name, body, deadline))
    if result is None:
        return Response(status_code=CLIENT_CLOSED)
    return Response(result.model_dump_json(), media_type="application/json")


def check_layout(kind: str | None, layout: str) -> None:
    """A process reward model's eval reads its steps as the prm component does: step_tag is a causal LM's layout
    (kind prm_lm), trl and qwen_prm a token-classification model's (kind prm); 422 on `layout` otherwise."""
    if kind in PRM_KINDS and (layout == "step_tag") != (kind == "prm_lm"):
        needed = "prm_lm" if layout == "step_tag" else "prm"
        raise Refused(422, f"layout {layout} needs a model of kind {needed}; this one is of kind {kind}", "layout")


def check_eval_limits(body: EvalRequest, max_items: int, max_chars: int) -> None:
    """The batch limits of /v1/score hold for an eval too: 413 past them."""
    items = sum(len(group.completions) for group in body.groups)
    if items > max_items:
        raise Refused(413, f"{items} completions in one eval; the limit is {max_items} (VERIFIER_MAX_BATCH_ITEMS)")
    for index, group in enumerate(body.groups):
        if any(len(text) > max_chars for text in group.completions):
            raise Refused(413, f"groups.{index}.completions: a completion is over VERIFIER_MAX_COMPLETION_CHARS")
