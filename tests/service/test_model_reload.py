"""Online update through a real server, with tiny random-weight reward models built here: a reload swaps the version
that /v1/models lists and results carry; requests in flight across swaps are each scored wholly by one version, with
that version's direct forward; a reload that fails keeps the old version serving and says why without the path or the
checkpoint's contents; a second reload while one runs is a 409; an unknown model is a 404; both routes need the API
key. The eval endpoint's metrics equal reward_models/metrics.py over the scores /v1/score gives the same items, reach
1 and 0 on groups labelled by those scores, and its drift compares with the version before the reload."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("torch", reason="the `models` extra (torch, transformers) is not installed")

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from reward_models import metrics
from reward_models.layout import raw_text
from tests.conftest import MODEL_SERVER_READY_S, Server, running_server
from trainer_client.tiny_model import build_reward_model, build_tokenizer, gsm8k_rows, training_text

KEY = "reload-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
MAX_TOKENS = 96
PROMPT = "Tom has 3 apples and buys 4 more. How many apples does Tom have now?"
COMPLETIONS = [f"Tom has 3 + 4 = {n} apples.\n#### {n}" + " So it is." * (n % 5) for n in range(4, 16)]


def build(path: Path, seed: int) -> Path:
    path.mkdir(parents=True)
    build_tokenizer(path, training_text(gsm8k_rows(100, seed=1)))
    build_reward_model(path, seed=seed, max_positions=256)
    return path


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("reload")
    found = {"a": build(root / "served" / "a", seed=0), "b": build(root / "served" / "b", seed=1)}
    broken, two_labels = root / "served" / "broken", root / "served" / "two"
    for path in (broken, two_labels):  # the tokenizer, and a config that is not JSON or a model with two labels
        path.mkdir()
        for file in found["a"].iterdir():
            if file.name.startswith(("tokenizer", "special")):
                (path / file.name).write_bytes(file.read_bytes())
    (broken / "config.json").write_text("SECRET-CONFIG-CONTENT {")
    two = AutoModelForSequenceClassification.from_pretrained(found["a"], num_labels=2, ignore_mismatched_sizes=True)
    two.save_pretrained(two_labels)
    return {**found, "broken": broken, "two": two_labels, "root": root / "served", "outside": build(root / "x", 3)}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, checkpoints: dict[str, Path]) -> Iterator[Server]:
    models = {"tiny": {"path": str(checkpoints["a"]), "max_tokens": MAX_TOKENS, "batch_tokens": 2 * MAX_TOKENS}}
    settings: dict[str, Any] = {
        "math_workers": 1,
        "code_enabled": "false",
        "models": json.dumps(models),
        "model_roots": json.dumps([str(checkpoints["root"])]),
        "api_key": KEY,
    }
    with running_server(
        tmp_path_factory.mktemp("reload-server"), ready_timeout=MODEL_SERVER_READY_S, **settings
    ) as running:
        yield running


@pytest.fixture(scope="module")
def direct(checkpoints: dict[str, Path]) -> dict[str, list[float]]:
    """Each completion's score under each version, as transformers gives it for the unpadded sequence."""
    tokenizer = AutoTokenizer.from_pretrained(checkpoints["a"])
    found = {}
    for name in ("a", "b"):
        model = AutoModelForSequenceClassification.from_pretrained(checkpoints[name]).eval()
        with torch.inference_mode():
            found[name] = [
                float(model(**tokenizer(raw_text(PROMPT, c, tokenizer.eos_token), return_tensors="pt")).logits[0, 0])
                for c in COMPLETIONS
            ]
    return found


def reload(server: Server, path: Path | str | None = None, **extra: Any) -> httpx.Response:
    body = {} if path is None else {"path": str(path)}
    return httpx.post(f"{server.url}/v1/models/tiny/reload", json=body, headers=AUTH, timeout=120, **extra)


def versions(server: Server) -> dict[str, Any]:
    [model] = httpx.get(f"{server.url}/v1/models", timeout=10).json()["models"]
    return dict(model)


def score(server: Server, completions: list[str]) -> list[dict[str, Any]]:
    items = [{"prompt": PROMPT, "completion": c, "rm": {"model": "tiny"}} for c in completions]
    response = httpx.post(f"{server.url}/v1/score", json={"items": items}, headers=AUTH, timeout=120)
    assert response.status_code == 200, response.text
    return [result["components"]["rm"] for result in response.json()["results"]]


def served_version(server: Server, name: str, checkpoints: dict[str, Path]) -> str:
    """Load checkpoint `name` (a or b) and return its version."""
    response = reload(server, checkpoints[name])
    assert response.status_code == 200, response.text
    return str(response.json()["version"])


def test_a_reload_swaps_the_version_listed_and_echoed(
    server: Server, checkpoints: dict[str, Path], direct: dict[str, list[float]]
) -> None:
    version_a = served_version(server, "a", checkpoints)
    response = reload(server, checkpoints["b"])
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (answer["previous_version"], answer["path"], answer["loaded"]) == (version_a, str(checkpoints["b"]), True)
    version_b = answer["version"]
    assert version_b != version_a and versions(server)["version"] == version_b
    assert versions(server)["path"] == str(checkpoints["b"]) and versions(server)["reloading"] is False
    results = score(server, COMPLETIONS[:3])
    assert [r["model_version"] for r in results] == [version_b] * 3
    assert [r["score"] for r in results] == pytest.approx(direct["b"][:3], abs=1e-4)
    again = reload(server)  # no path: the configured one, read again
    assert again.status_code == 200 and again.json()["version"] == version_a
    assert [r["score"] for r in score(server, COMPLETIONS[:3])] == pytest.approx(direct["a"][:3], abs=1e-4)
    ready = httpx.get(f"{server.url}/readyz", timeout=10)
    assert ready.status_code == 200 and ready.json()["models"]["tiny"]["version"] == version_a


def test_requests_in_flight_across_swaps_are_each_scored_by_one_version(
    server: Server, checkpoints: dict[str, Path], direct: dict[str, list[float]]
) -> None:
    """Clients score the twelve completions over and over while the model is swapped a, b, a, b: each answer's
    results carry one version, and every score is that version's. Requests answered before the first swap are a's,
    those sent after the last are b's, so both versions are seen."""
    by_version = {served_version(server, "a", checkpoints): "a"}
    answers: list[tuple[int, list[dict[str, Any]]]] = []  # (swaps done when the request was sent, its results)
    swaps, stop, lock = [0], threading.Event(), threading.Lock()

    def client() -> None:
        while not stop.is_set():
            sent = swaps[0]
            results = score(server, COMPLETIONS)
            with lock:
                answers.append((sent, results))

    def answered(condition: Any) -> int:
        with lock:
            return sum(1 for sent, _ in answers if condition(sent))

    with ThreadPoolExecutor(4) as pool:
        running = [pool.submit(client) for _ in range(4)]
        while answered(lambda sent: True) < 3:
            threading.Event().wait(0.05)
        for name in ("b", "a", "b"):
            version = served_version(server, name, checkpoints)
            by_version[version] = name
            swaps[0] += 1
        while answered(lambda sent: sent == 3) < 3:
            threading.Event().wait(0.05)
        stop.set()
        for future in running:
            future.result()
    seen = set()
    for _, results in answers:
        [version] = {r["model_version"] for r in results}  # one version per request
        seen.add(by_version[version])
        assert [r["score"] for r in results] == pytest.approx(direct[by_version[version]], abs=1e-4)
    assert seen == {"a", "b"}


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("missing", "not a directory on the server"),
        ("broken", "the checkpoint cannot be loaded"),
        ("two", "num_labels 1, this one has 2"),
        ("outside", "not under any of VERIFIER_MODEL_ROOTS"),
        ("relative", "must be an absolute path"),
    ],
)
def test_a_reload_that_fails_keeps_the_old_version_serving(
    server: Server, checkpoints: dict[str, Path], direct: dict[str, list[float]], target: str, message: str
) -> None:
    version_a = served_version(server, "a", checkpoints)
    paths: dict[str, Path | str] = {**checkpoints, "missing": checkpoints["root"] / "missing", "relative": "served/b"}
    path = paths[target]
    response = reload(server, path)
    assert response.status_code == 422, response.text
    [error] = response.json()["errors"]
    assert error["loc"] == "path" and message in error["msg"]
    assert str(path) not in response.text and "SECRET" not in response.text
    assert versions(server)["version"] == version_a
    [result] = score(server, COMPLETIONS[:1])
    assert (result["model_version"], result["score"]) == (version_a, pytest.approx(direct["a"][0], abs=1e-4))


def test_a_second_reload_while_one_runs_is_a_409(server: Server, checkpoints: dict[str, Path]) -> None:
    """Two reloads sent at once: the one that starts first runs, the other arrives while it loads and is refused
    (the server is ready throughout, and the one that ran swaps). Should the first finish before the second arrives
    (nothing to refuse then), the attempt is made again."""
    served_version(server, "a", checkpoints)
    refused = []
    for attempt in range(20):
        targets = ("b", "a") if attempt % 2 == 0 else ("a", "b")
        with ThreadPoolExecutor(2) as pool:
            sent = [pool.submit(reload, server, checkpoints[target]) for target in targets]
            assert httpx.get(f"{server.url}/readyz", timeout=10).status_code == 200  # ready while a reload runs
            answers = [future.result() for future in sent]
        assert all(answer.status_code in (200, 409) for answer in answers), [a.text for a in answers]
        if sorted(answer.status_code for answer in answers) == [200, 409]:
            [ran] = [answer for answer in answers if answer.status_code == 200]
            refused.append(ran)
            assert versions(server)["version"] == ran.json()["version"]  # the first one's swap stands
            break
    assert refused, "no second reload was refused"


def test_an_unknown_model_is_a_404_and_both_routes_need_the_key(server: Server) -> None:
    for route in ("reload", "eval"):
        missing = httpx.post(f"{server.url}/v1/models/not_served_here/{route}", json={}, headers=AUTH, timeout=10)
        assert missing.status_code == 404 and "not_served_here" not in missing.text
        unauthorized = httpx.post(f"{server.url}/v1/models/tiny/{route}", json={}, timeout=10)
        assert unauthorized.status_code == 401


def evaluate(server: Server, groups: list[dict[str, Any]]) -> dict[str, Any]:
    response = httpx.post(f"{server.url}/v1/models/tiny/eval", json={"groups": groups}, headers=AUTH, timeout=120)
    assert response.status_code == 200, response.text
    return dict(response.json())


def groups_of(outcomes: list[float]) -> list[dict[str, Any]]:
    """The twelve completions in three groups of four."""
    return [
        {"prompt": PROMPT, "completions": COMPLETIONS[start : start + 4], "outcomes": outcomes[start : start + 4]}
        for start in (0, 4, 8)
    ]


def test_eval_metrics_are_the_metric_functions_over_the_served_scores(
    server: Server, checkpoints: dict[str, Path]
) -> None:
    version = served_version(server, "a", checkpoints)
    scores = [r["score"] for r in score(server, COMPLETIONS)]
    outcomes = [1.0, 0.0, 0.7, 0.0, 0.2, 1.0, 1.0, 0.0, 0.0, 0.3, 0.0, 1.0]
    got = evaluate(server, groups_of(outcomes))
    right = [o >= 0.5 for o in outcomes]
    accuracy, pairs = metrics.ranking_accuracy([(scores[s : s + 4], right[s : s + 4]) for s in (0, 4, 8)])
    assert got["model_version"] == version
    assert got["counts"] == {"groups": 3, "items": 12, "scored": 12, "unscored": 0, "pairs": pairs}
    assert got["ranking_accuracy"] == pytest.approx(accuracy, abs=1e-6)
    assert got["auroc"] == pytest.approx(metrics.auroc(scores, right), abs=1e-6)
    sigmoid = [1 / (1 + math.exp(-s)) for s in scores]
    assert got["calibration_error"] == pytest.approx(metrics.calibration_error(sigmoid, outcomes), abs=1e-6)
    assert got["scores"] == pytest.approx(metrics.summary(scores), abs=1e-6)


def test_eval_on_groups_labelled_by_the_scores_gives_known_accuracy_and_auroc(
    server: Server, checkpoints: dict[str, Path]
) -> None:
    """The twelve completions ranked by their served scores: group g holds ranks g, g+3, g+6 and g+9, and the six
    best are right. Each group then holds two right and two wrong, and every pair and every item is ranked right:
    accuracy and AUROC 1; labelled the other way, 0."""
    served_version(server, "a", checkpoints)
    scores = [r["score"] for r in score(server, COMPLETIONS)]
    assert len(set(scores)) == len(scores)
    ranked = sorted(range(12), key=lambda index: scores[index])
    members = [[ranked[rank] for rank in (g, g + 3, g + 6, g + 9)] for g in range(3)]
    right = {index for index in ranked[6:]}

    def groups(flip: bool) -> list[dict[str, Any]]:
        return [
            {
                "prompt": PROMPT,
                "completions": [COMPLETIONS[i] for i in group],
                "outcomes": [float((i in right) != flip) for i in group],
            }
            for group in members
        ]

    got = evaluate(server, groups(flip=False))
    assert (got["ranking_accuracy"], got["auroc"], got["counts"]["pairs"]) == (1.0, 1.0, 12)
    flipped = evaluate(server, groups(flip=True))
    assert (flipped["ranking_accuracy"], flipped["auroc"]) == (0.0, 0.0)


def test_eval_drift_compares_with_the_version_before_the_reload(
    server: Server, checkpoints: dict[str, Path], direct: dict[str, list[float]]
) -> None:
    served_version(server, "a", checkpoints)
    outcomes = [float(i % 2) for i in range(12)]
    evaluate(server, groups_of(outcomes))  # a's scores, remembered
    version_a = versions(server)["version"]
    served_version(server, "b", checkpoints)
    got = evaluate(server, groups_of(outcomes))
    before, now = direct["a"], direct["b"]
    assert got["drift"]["previous_version"] == version_a and got["drift"]["items"] == 12
    mean_abs = sum(abs(x - y) for x, y in zip(now, before, strict=True)) / 12
    assert got["drift"]["mean_abs_diff"] == pytest.approx(mean_abs, abs=1e-4)
    assert got["drift"]["spearman"] == pytest.approx(metrics.spearman(now, before), abs=1e-6)
    fewer = evaluate(server, groups_of(outcomes)[:1])  # b's last eval is now these four; a's stays
    assert fewer["drift"]["items"] == 4
    served_version(server, "a", checkpoints)


@pytest.mark.parametrize(
    ("group", "field"),
    [
        ({"completions": ["a", "b"], "outcomes": [1.0]}, "groups.0"),
        ({"completions": ["a"], "outcomes": [2.0]}, "groups.0.outcomes.0"),
        ({"completions": ["a"], "outcomes": [1.0], "scores": [1.0]}, "groups.0"),
    ],
)
def test_a_bad_eval_body_is_a_422_naming_the_field(server: Server, group: dict[str, Any], field: str) -> None:
    body = {"groups": [group]}
    response = httpx.post(f"{server.url}/v1/models/tiny/eval", json=body, headers=AUTH, timeout=10)
    assert response.status_code == 422, response.text
    assert [e["loc"] for e in response.json()["errors"]] == [field]
