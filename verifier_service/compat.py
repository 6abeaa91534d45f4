"""The trainer routes (/v1/compat/...): OpenRLHF, slime and NeMo-Gym call the verifier in their own shapes
(compat_mapping.py says what those mean). Each scores as /v1/score does: the same body-size and item limits, the same
engine, the same metrics; auth takes the key from the header or, for trainers that send none, from the URL
(url_key.py)."""

from __future__ import annotations

import hmac
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict

from verifier_service.compat_mapping import (
    CompatConfig,
    Invalid,
    M,
    NeMoGymVerifyRequest,
    OpenRLHFRequest,
    SlimeRequest,
    invalid,
    nemo_gym_answer,
    nemo_gym_label,
    openrlhf_answer,
    openrlhf_completion,
    parse_body,
    parse_config,
    response_text,
    score_item,
    slime_answer,
    strip_special_tokens,
    unjudged,
)
from verifier_service.errors import CLIENT_CLOSED, invalid_request
from verifier_service.routes import ERRORS, EngineDep, MetricsDep, SettingsDep, check_limits, until_disconnected
from verifier_service.schema import ErrorResponse, ItemResult, ScoreItem, ScoreRequest
from verifier_service.url_key import SCOPE_KEY

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/compat", tags=["trainers"])
SCORE_PATHS = ("/v1/compat/openrlhf", "/v1/compat/slime", "/v1/compat/nemo-gym/verify")  # counted as score requests

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="CompatKey",
    description="Needed when the server sets VERIFIER_API_KEY: `Authorization: Bearer <key>`, or the key in the URL, "
    "`/v1/compat/key/<key>/openrlhf` (for trainers that send no headers).",
)


BearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


async def require_compat_key(request: Request, settings: SettingsDep, credentials: BearerDep) -> None:
    """The header's key, else the URL's; checked before the body is read."""
    if settings.api_key is None:
        return
    given: str = credentials.credentials if credentials is not None else request.scope.get(SCOPE_KEY, "")
    if not given or not hmac.compare_digest(given.encode(), settings.api_key.get_secret_value().encode()):
        raise HTTPException(
            401,
            "missing or wrong API key (send 'Authorization: Bearer <key>', or put the key in the URL: "
            "/v1/compat/key/<key>/...)",
            {"WWW-Authenticate": "Bearer"},
        )


_COMPONENTS = "Components a gold label is scored with, and whose scores are logged: math+format (default math)."
_WEIGHTS = "Weights of those components, e.g. math:1+format:0.5 (default 1 each)."
_ON_UNJUDGED = "The reward of a sample the verifier cannot judge, flagged verifier_judged=0; without it: a 503."
ComponentsParam = Annotated[list[str] | None, Query(description=_COMPONENTS)]
WeightsParam = Annotated[list[str] | None, Query(description=_WEIGHTS)]


async def _config(components: ComponentsParam = None, weights: WeightsParam = None) -> CompatConfig:
    return parse_config(components, weights, None)


async def _config_with_fallback(
    components: ComponentsParam = None,
    weights: WeightsParam = None,
    on_unjudged: Annotated[str | None, Query(description=_ON_UNJUDGED)] = None,
) -> CompatConfig:
    return parse_config(components, weights, on_unjudged)


ConfigDep = Annotated[CompatConfig, Depends(_config)]
FallbackConfigDep = Annotated[CompatConfig, Depends(_config_with_fallback)]


def _body(model: type[M]) -> Callable[[Request], Awaitable[M]]:
    async def read(request: Request) -> M:
        return parse_body(model, await request.body())

    return read


def _documented(model: type[BaseModel], answer: type[BaseModel]) -> dict[str, Any]:
    """The route's request and answer in the OpenAPI document (the handlers read and write JSON themselves)."""
    body = {"required": True, "content": {"application/json": {"schema": model.model_json_schema()}}}
    errors: dict[int | str, dict[str, Any]] = {**ERRORS, 503: {"model": ErrorResponse}}
    return {
        "dependencies": [Depends(require_compat_key)],
        "responses": {200: {"model": answer}, **errors},
        "openapi_extra": {"requestBody": body},
    }


class OpenRLHFAnswer(BaseModel):
    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]]


class SlimeAnswer(BaseModel):
    model_config = ConfigDict(extra="allow")
    reward: float
    verifier_judged: float


class NeMoGymVerifyAnswer(BaseModel):
    model_config = ConfigDict(extra="allow")
    reward: float
    mask_sample: bool
    failure_reason: str | None
    verifier_judged: float


@router.post("/openrlhf", **_documented(OpenRLHFRequest, OpenRLHFAnswer))
async def openrlhf(
    request: Request,
    body: Annotated[OpenRLHFRequest, Depends(_body(OpenRLHFRequest))],
    config: FallbackConfigDep,
    engine: EngineDep,
    settings: SettingsDep,
    metrics: MetricsDep,
) -> Response:
    """OpenRLHF's `--reward.remote_url`: `{"query", "prompts", "labels"}` -> `{"rewards", "scores", "extra_logs"}`.
    A sample the verifier cannot judge is a 503 (OpenRLHF retries, then stops), unless `on_unjudged` is set."""
    count = len(body.query)
    prompts = _one_each(body.prompts, count, "prompts")
    labels = _one_each(body.labels, count, "labels")
    tokens = settings.compat_special_tokens
    items = [
        score_item(openrlhf_completion(query, prompt, tokens, f"query.{index}"), label, config, f"labels.{index}")
        for index, (query, prompt, label) in enumerate(zip(body.query, prompts, labels, strict=True))
    ]
    results = await _score(request, items, engine, settings, metrics, "query.{}", "labels.{}")
    if results is None:
        return Response(status_code=CLIENT_CLOSED)
    _judged_or_503(results, config)
    return JSONResponse(openrlhf_answer(items, results, config))


@router.post("/slime", **_documented(SlimeRequest, SlimeAnswer))
async def slime(
    request: Request,
    body: Annotated[SlimeRequest, Depends(_body(SlimeRequest))],
    config: FallbackConfigDep,
    engine: EngineDep,
    settings: SettingsDep,
    metrics: MetricsDep,
) -> Response:
    """slime's `--rm-type remote_rm`: `{"prompt", "response", "label"}` -> `{"reward", "verifier_judged", ...}` (run
    with `--reward-key reward`). A sample the verifier cannot judge is a 503 unless `on_unjudged` is set."""
    completion = strip_special_tokens(body.response, settings.compat_special_tokens)
    items = [score_item(completion, body.label, config, "label")]
    results = await _score(request, items, engine, settings, metrics, "response", "label")
    if results is None:
        return Response(status_code=CLIENT_CLOSED)
    _judged_or_503(results, config)
    return JSONResponse(slime_answer(results[0], config))


@router.post("/nemo-gym/verify", **_documented(NeMoGymVerifyRequest, NeMoGymVerifyAnswer))
async def nemo_gym_verify(
    request: Request,
    body: Annotated[NeMoGymVerifyRequest, Depends(_body(NeMoGymVerifyRequest))],
    config: ConfigDep,
    engine: EngineDep,
    settings: SettingsDep,
    metrics: MetricsDep,
) -> Response:
    """NeMo-Gym's resources-server `/verify`: the row, `responses_create_params` and `response` -> the body plus
    `reward` and `mask_sample`. A sample the verifier cannot judge is masked (reward 0.0, `mask_sample: true`)."""
    label, where = nemo_gym_label(body)
    items = [score_item(response_text(body.response), label, config, where)]
    results = await _score(request, items, engine, settings, metrics, "response", where)
    if results is None:
        return Response(status_code=CLIENT_CLOSED)
    return JSONResponse(nemo_gym_answer(body, results[0], config))


class _Session(BaseModel):
    model_config = ConfigDict(extra="ignore")
    resources_session_id: str | None = None


@router.post("/nemo-gym/seed_session", dependencies=[Depends(require_compat_key)])
async def nemo_gym_seed_session(request: Request) -> dict[str, str]:
    """Gym's `/seed_session`: the verifier keeps no session; a `resources_session_id` is echoed."""
    return await _session(request)


@router.post("/nemo-gym/close_session", dependencies=[Depends(require_compat_key)])
async def nemo_gym_close_session(request: Request) -> dict[str, str]:
    """Gym's `/close_session`: nothing to close; a `resources_session_id` is echoed."""
    return await _session(request)


@router.get("/nemo-gym/reverify_mode", dependencies=[Depends(require_compat_key)])
async def nemo_gym_reverify_mode() -> str:
    """Gym's `/reverify_mode`: `stateless`, since a verdict depends on the request alone."""
    return "stateless"


async def _session(request: Request) -> dict[str, str]:
    session = parse_body(_Session, await request.body() or b"{}")
    return {} if session.resources_session_id is None else {"resources_session_id": session.resources_session_id}


def _one_each(values: list[Any] | None, count: int, name: str) -> Sequence[Any]:
    if values is None:
        return [None] * count
    if len(values) != count:
        raise invalid(name, "one per query")
    return values


async def _score(
    request: Request,
    items: list[ScoreItem],
    engine: EngineDep,
    settings: SettingsDep,
    metrics: MetricsDep,
    completion_at: str,
    label_at: str,
) -> list[ItemResult] | None:
    """As /v1/score scores: its limits, its engine, its disconnect handling and latency metric. A problem is located
    at the trainer's field (`completion_at` and `label_at`, with `{}` for the sample's index)."""
    _check(items, settings, completion_at, label_at)
    started = time.perf_counter()
    results = await until_disconnected(request, engine.score(items))
    if results is None:
        log.info("the client went away; the scoring of its %d items was cancelled", len(items))
        return None
    metrics.batch_seconds.observe(time.perf_counter() - started)
    return results


_COMPLETION_AT = re.compile(r"^items\.(\d+)\.completion")


def _check(items: list[ScoreItem], settings: SettingsDep, completion_at: str, label_at: str) -> None:
    try:
        check_limits(ScoreRequest.model_construct(items=items), settings)
    except HTTPException as exc:  # 413: the message names the item's completion; name the trainer's field
        detail = _COMPLETION_AT.sub(lambda found: completion_at.format(found[1]), str(exc.detail))
        raise HTTPException(exc.status_code, detail.replace("items in one request", "samples in one request")) from None
    except RequestValidationError as exc:  # an item this server does not score: code, when code is off
        errors = [{**e, "loc": f"{label_at.format(e['loc'][1])}.{e['loc'][2]}"} for e in exc.errors()]
        raise Invalid(errors) from None


def _judged_or_503(results: list[ItemResult], config: CompatConfig) -> None:
    why = unjudged(results)
    if why is not None and config.on_unjudged is None:
        raise HTTPException(
            503,
            f"the verifier could not judge this sample: {why}. To give such samples a stand-in reward instead "
            "(flagged verifier_judged=0), add on_unjudged=<reward> to the URL's query",
        )


def install_compat(app: FastAPI) -> None:
    """The trainer routes, and their 422 answer (in the form of every other 422)."""
    app.include_router(router)
    app.add_exception_handler(Invalid, _invalid)  # type: ignore[arg-type]


async def _invalid(request: Request, exc: Invalid) -> JSONResponse:
    return invalid_request(exc.errors, exc.found)
