"""The online update of a process reward model through a real server, with tiny random-weight PRMs built here.

- `POST /v1/models/{name}/eval` on a PRM (kind prm and prm_lm) scores each completion as the prm component does:
  its metrics are reward_models/metrics.py's over the aggregates `/v1/score` gives (calibration on the score itself, a
  probability), a completion with no steps is unscored, groups labelled by the served scores give accuracy and AUROC
  1 (and 0 flipped), drift compares with the version before a reload, a layout not of the model's kind is a 422.
- `OnlineRewardModel(method="prm_outcome")`, in each layout the service reads (trl and qwen_prm on a
  token-classification model, step_tag on a causal LM): the training rows carry their labels exactly where the
  service reads the steps (the saved checkpoint, served, gives at each step the score a direct forward gives at the
  row's label positions, and not the one a token earlier), and a few epochs on separable outcomes raise the eval's
  held-out ranking accuracy; `train.py --online_rm` trains in the layout the run's prm component reads.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest

pytest.importorskip("trl", reason="the `train` extra (trl, torch, transformers) is not installed")

import torch
from transformers import AutoModelForCausalLM, AutoModelForTokenClassification, AutoTokenizer

from reward_models import metrics
from reward_models.layout import QWEN_PRM_TAG, step_layout, step_spans
from tests.conftest import MODEL_SERVER_READY_S, Server, running_server
from trainer_client import VerifierReward
from trainer_client.online_rm import IGNORED, OnlineRewardModel, step_label_rows
from trainer_client.tiny_model import build_process_reward_model, build_tokenizer, gsm8k_rows, training_text

MAX_TOKENS = 192  # qwen_prm's system turn alone is about 100 of the tiny tokenizer's tokens
PROMPT = "Tom has 3 apples and buys 4 more. How many apples does Tom have now?"
COMPLETIONS = [  # no two share their first step (min would then often be the same step's score)
    f"Tom has {n} apples.\nHe buys {n % 4} more.\nSo he has {n + n % 4} apples." + "\nIt is so." * (n % 3)
    for n in range(4, 16)
]


def build(path: Path, *, seed: int, causal_lm: bool = False, qwen_tag: bool = False) -> Path:
    """A tiny PRM; with `qwen_tag`, its tokenizer has `<extra_0>` as one token (Qwen2.5-Math-PRM's step tag)."""
    path.mkdir(parents=True)
    build_tokenizer(path, [*training_text(gsm8k_rows(80, seed=1)), "It is yes no plus What"])
    if qwen_tag:
        tokenizer = AutoTokenizer.from_pretrained(path)
        tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", QWEN_PRM_TAG]})
        tokenizer.save_pretrained(path)
    build_process_reward_model(path, causal_lm=causal_lm, seed=seed, max_positions=256)
    return path


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("prm-online").resolve()


@pytest.fixture(scope="module")
def checkpoints(root: Path) -> dict[str, Path]:
    return {
        "a": build(root / "a", seed=0),
        "b": build(root / "b", seed=1),
        "shepherd": build(root / "shepherd", seed=2, causal_lm=True),
        "qwen": build(root / "qwen", seed=3, qwen_tag=True),
    }


@pytest.fixture(scope="module")
def server(root: Path, checkpoints: dict[str, Path]) -> Iterator[Server]:
    limits = {"max_tokens": MAX_TOKENS, "batch_tokens": 4 * MAX_TOKENS}
    models = {
        "prm": {"path": str(checkpoints["a"]), "kind": "prm", **limits},
        "shepherd": {"path": str(checkpoints["shepherd"]), "kind": "prm_lm", **limits},
        "qwen": {"path": str(checkpoints["qwen"]), "kind": "prm", **limits},
    }
    settings = {"math_workers": 1, "code_enabled": "false", "models": json.dumps(models),
                "model_roots": json.dumps([str(root)])}  # fmt: skip
    (root / "server").mkdir()
    with running_server(root / "server", ready_timeout=MODEL_SERVER_READY_S, **settings) as running:
        yield running


def reload(server: Server, path: Path, model: str = "prm") -> str:
    response = httpx.post(f"{server.url}/v1/models/{model}/reload", json={"path": str(path)}, timeout=120)
    assert response.status_code == 200, response.text
    return str(response.json()["version"])


def evaluate(server: Server, model: str, groups: list[dict[str, Any]], **reading: Any) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/models/{model}/eval", json={"groups": groups, **reading}, timeout=120)


def evaluated(server: Server, model: str, groups: list[dict[str, Any]], **reading: Any) -> dict[str, Any]:
    response = evaluate(server, model, groups, **reading)
    assert response.status_code == 200, response.text
    return dict(response.json())


def prm_scored(server: Server, model: str, completions: list[str], prompt: str = PROMPT, **spec: Any) -> list[Any]:
    """The prm component's results for the completions (the eval must score as it does)."""
    items = [{"prompt": prompt, "completion": c, "prm": {"model": model, **spec}} for c in completions]
    response = httpx.post(f"{server.url}/v1/score", json={"items": items}, timeout=120)
    assert response.status_code == 200, response.text
    return [result["components"]["prm"] for result in response.json()["results"]]


def groups_of(completions: list[str], outcomes: list[float], size: int = 4) -> list[dict[str, Any]]:
    return [
        {"prompt": PROMPT, "completions": completions[start : start + size], "outcomes": outcomes[start : start + size]}
        for start in range(0, len(completions), size)
    ]


# --- the eval endpoint on a PRM ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "reading"),
    [
        ("prm", {}),  # the prm component's defaults: trl, "\n", min
        ("prm", {"aggregate": "mean", "separator": ".\n"}),
        ("shepherd", {"layout": "step_tag", "aggregate": "last"}),
    ],
)
def test_prm_eval_metrics_are_the_metric_functions_over_the_served_aggregates(
    server: Server, checkpoints: dict[str, Path], model: str, reading: dict[str, Any]
) -> None:
    version = reload(server, checkpoints["a"])
    completions = [*COMPLETIONS[:11], "\n\n  \n"]  # the last has no steps: unscored
    outcomes = [1.0, 0.0, 0.7, 0.0, 0.2, 1.0, 1.0, 0.0, 0.0, 0.3, 1.0, 1.0]
    served = prm_scored(server, model, completions, **reading)
    assert [r["verdict"] for r in served] == ["scored"] * 11 + ["no_steps"]
    scores = [r["score"] for r in served[:11]]
    assert len(set(scores)) == 11 and all(0 < s < 1 for s in scores)
    got = evaluated(server, model, groups_of(completions, outcomes), **reading)
    right = [o >= 0.5 for o in outcomes[:11]]
    by_group = [(scores[s : s + 4], right[s : s + 4]) for s in (0, 4, 8)]
    accuracy, pairs = metrics.ranking_accuracy(by_group)
    assert got["model_version"] == (version if model == "prm" else served[0]["model_version"])
    assert got["counts"] == {"groups": 3, "items": 12, "scored": 11, "unscored": 1, "pairs": pairs}
    assert got["ranking_accuracy"] == pytest.approx(accuracy, abs=1e-6)
    assert got["auroc"] == pytest.approx(metrics.auroc(scores, right), abs=1e-6)
    calibration = metrics.calibration_error(scores, outcomes[:11])  # the aggregate is a probability: no sigmoid
    assert got["calibration_error"] == pytest.approx(calibration, abs=1e-6)
    assert got["scores"] == pytest.approx(metrics.summary(scores), abs=1e-6)


def test_prm_eval_on_groups_labelled_by_the_scores_gives_known_accuracy_and_auroc(
    server: Server, checkpoints: dict[str, Path]
) -> None:
    """The twelve completions ranked by their served aggregates: group g holds ranks g, g+3, g+6, g+9, the six best
    right; every pair and item is then ranked right (accuracy and AUROC 1); labelled the other way, 0."""
    reload(server, checkpoints["a"])
    scores = [r["score"] for r in prm_scored(server, "prm", COMPLETIONS)]
    assert len(set(scores)) == 12
    ranked = sorted(range(12), key=lambda index: scores[index])
    members = [[ranked[rank] for rank in (g, g + 3, g + 6, g + 9)] for g in range(3)]
    right = set(ranked[6:])

    def groups(flip: bool) -> list[dict[str, Any]]:
        return [
            {
                "prompt": PROMPT,
                "completions": [COMPLETIONS[i] for i in group],
                "outcomes": [float((i in right) != flip) for i in group],
            }
            for group in members
        ]

    got = evaluated(server, "prm", groups(flip=False))
    assert (got["ranking_accuracy"], got["auroc"], got["counts"]["pairs"]) == (1.0, 1.0, 12)
    flipped = evaluated(server, "prm", groups(flip=True))
    assert (flipped["ranking_accuracy"], flipped["auroc"]) == (0.0, 0.0)


def test_prm_eval_drift_compares_with_the_version_before_the_reload(
    server: Server, checkpoints: dict[str, Path]
) -> None:
    version_a = reload(server, checkpoints["a"])
    outcomes = [float(i % 2) for i in range(12)]
    before = [r["score"] for r in prm_scored(server, "prm", COMPLETIONS)]
    evaluated(server, "prm", groups_of(COMPLETIONS, outcomes))  # a's aggregates, remembered
    reload(server, checkpoints["b"])
    now = [r["score"] for r in prm_scored(server, "prm", COMPLETIONS)]
    got = evaluated(server, "prm", groups_of(COMPLETIONS, outcomes))
    assert got["drift"]["previous_version"] == version_a and got["drift"]["items"] == 12
    mean_abs = sum(abs(x - y) for x, y in zip(now, before, strict=True)) / 12
    assert got["drift"]["mean_abs_diff"] == pytest.approx(mean_abs, abs=1e-6) and mean_abs > 1e-3
    assert got["drift"]["spearman"] == pytest.approx(metrics.spearman(now, before), abs=1e-6)
    other = evaluated(server, "prm", groups_of(COMPLETIONS, outcomes), aggregate="mean")  # other scores: no match
    assert other["drift"]["items"] == 0


@pytest.mark.parametrize(("model", "layout", "kind"), [("prm", "step_tag", "prm_lm"), ("shepherd", "trl", "prm")])
def test_a_prm_eval_in_a_layout_not_of_the_models_kind_is_a_422_on_layout(
    server: Server, model: str, layout: str, kind: str
) -> None:
    response = evaluate(server, model, groups_of(COMPLETIONS[:2], [1.0, 0.0]), layout=layout)
    assert response.status_code == 422, response.text
    [error] = response.json()["errors"]
    assert error["loc"] == "layout" and f"kind {kind}" in error["msg"]


# --- training a PRM from the rule outcomes --------------------------------------------------------------------------


def arithmetic(count: int, seed: int) -> list[tuple[str, str, float]]:
    """Prompts answered right in two steps, the last "yes", and wrong, the last "no": outcomes a tiny PRM can learn."""
    rng = random.Random(seed)
    found = []
    for _ in range(count):
        a, b = rng.randrange(10, 99), rng.randrange(10, 99)
        prompt = f"What is {a} plus {b}? "
        found += [(prompt, f"It is {a + b}.\nyes", 1.0), (prompt, f"It is {a + b + 1}.\nno", 0.0)]
    return found


LAYOUTS = {"prm": "trl", "qwen": "qwen_prm", "shepherd": "step_tag"}  # each served model's layout, as trained
STARTS = {"prm": "a", "qwen": "qwen", "shepherd": "shepherd"}  # the checkpoint each starts from
TAGGED = {"qwen": QWEN_PRM_TAG, "shepherd": "\u043a\u0438"}  # a step that holds the tag cannot be laid out


def direct(path: Path, layout: str, ids: list[int], positions: list[int]) -> list[float]:
    """A step's score at `positions`, from transformers' forward over the unpadded row as transformers loads the
    checkpoint back: softmax(logits)[1] of a token classifier; a causal LM's softmax over its logits of the good and
    the bad token, the good one's (Math-Shepherd's card)."""
    tokenizer = AutoTokenizer.from_pretrained(path)
    with torch.inference_mode():
        if layout != "step_tag":
            model = AutoModelForTokenClassification.from_pretrained(path).eval()
            return [float(p) for p in model(input_ids=torch.tensor([ids])).logits[0, positions].softmax(-1)[:, 1]]
        lm = AutoModelForCausalLM.from_pretrained(path).eval()
        good, bad = (tokenizer(token, add_special_tokens=False)["input_ids"][-1] for token in ("+", "-"))
        logits = lm(input_ids=torch.tensor([ids])).logits[0, positions][:, [good, bad]]
        return [float(p) for p in logits.softmax(-1)[:, 0]]


@pytest.mark.parametrize("model", list(LAYOUTS))
def test_training_rows_carry_their_labels_where_the_service_reads_the_steps(
    server: Server, checkpoints: dict[str, Path], root: Path, model: str
) -> None:
    layout = LAYOUTS[model]
    examples = [
        *arithmetic(6, seed=5),
        (PROMPT, COMPLETIONS[2], 1.0),
        (PROMPT, COMPLETIONS[5], 0.0),
        (PROMPT, "\n\n", 1.0),  # no steps: no row
        (PROMPT, "x\n" * 200, 1.0),  # over the model's length: no row (the service would not score it)
    ]
    if model in TAGGED:  # a step holding the tag: no row (the service's bad_layout)
        examples.append((PROMPT, f"It is {TAGGED[model]} 7.\nyes", 1.0))
    tokenizer = AutoTokenizer.from_pretrained(checkpoints[STARTS[model]])
    rows = step_label_rows(tokenizer, examples, "\n", 1.0, MAX_TOKENS, layout)
    assert len(rows) == len(examples) - 2 - int(model in TAGGED)
    for (ids, labels), (prompt, completion, outcome) in zip(rows, examples, strict=False):
        steps = [completion[start:end] for start, end in step_spans(completion, "\n")]
        expected, positions = step_layout(tokenizer, layout, prompt, steps, "\n")
        assert ids == expected and len(labels) == len(ids)
        labelled = {position: label for position, label in enumerate(labels) if label != IGNORED}
        assert labelled == ({p: 1 for p in positions} if outcome == 1.0 else {positions[-1]: 0})

    online = OnlineRewardModel(
        model, checkpoint=checkpoints[STARTS[model]], output_dir=root / f"rows-{model}", method="prm_outcome",
        layout=layout, learning_rate=3e-3, base_url=server.url,
    )  # fmt: skip
    path = root / f"rows-{model}" / "step-1"
    trained = online._train_steps(examples, path)
    assert trained is not None and trained["train_examples"] == len(rows)
    version = reload(server, path, model)
    for (ids, labels), (prompt, completion, outcome) in zip(rows, examples, strict=False):
        [result] = prm_scored(server, model, [completion], prompt=prompt, layout=layout)
        assert result["model_version"] == version
        served = [step["score"] for step in result["steps"]]
        positions = [position for position, label in enumerate(labels) if label != IGNORED]
        at_labels = direct(path, layout, ids, positions)
        read = served if outcome == 1.0 else served[-1:]  # a wrong answer's label is on its last step only
        assert read == pytest.approx(at_labels, abs=1e-4)
        assert read != pytest.approx(
            direct(path, layout, ids, [p - 1 for p in positions]), abs=1e-4
        )  # not a token early


def rule_batch(count: int, seed: int) -> dict[str, list[Any]]:
    """A GRPO-like call: each prompt answered right and wrong (`arithmetic`), with its gold for the math rule."""
    rows = arithmetic(count, seed)
    golds = [str(int(p.split()[2]) + int(p.split()[4].rstrip("?"))) for p, _, _ in rows]  # "What is A plus B? "
    return {"prompts": [p for p, _, _ in rows], "completions": [c for _, c, _ in rows], "solution": golds}


@pytest.mark.parametrize("model", list(LAYOUTS))
def test_the_callback_trains_a_prm_that_ranks_held_out_answers(
    server: Server, checkpoints: dict[str, Path], root: Path, model: str
) -> None:
    """The whole loop on a PRM, in each layout: the math rule's outcomes kept, step labels made from them, three
    epochs, a reload and the eval through the prm component's reading; held-out prompts' ranking accuracy rises from
    the random model's to at least 0.9."""
    layout = LAYOUTS[model]
    first = reload(server, checkpoints[STARTS[model]], model)
    rule = VerifierReward("math", base_url=server.url)
    online = OnlineRewardModel(
        model, checkpoint=checkpoints[STARTS[model]], output_dir=root / f"updates-{model}", method="prm_outcome",
        layout=layout, every_steps=1, held_out=0.3, learning_rate=3e-3, epochs=3, base_url=server.url,
    )  # fmt: skip
    online.observe(rule)
    call = rule_batch(60, seed=1)
    assert rule(**call, completion_ids=None) == [1.0, 0.0] * 60
    held = [
        {"prompt": prompt, "completions": [o.completion for o in kept], "outcomes": [o.outcome for o in kept]}
        for prompt, kept in online.outcomes.groups(held_out=True)
    ]
    before = evaluated(server, model, held, correct_threshold=1.0, layout=layout)
    assert before["model_version"] == first and before["counts"]["pairs"] > 5

    online.on_step_end(None, SimpleNamespace(global_step=1, is_world_process_zero=True), None)
    [update] = online.history
    after = update["eval"]
    assert after["model_version"] == update["version"] != first
    assert after["counts"]["pairs"] == before["counts"]["pairs"]  # the same held-out groups, never trained on
    assert after["ranking_accuracy"] >= 0.9 and after["ranking_accuracy"] > before["ranking_accuracy"], (
        before["ranking_accuracy"],
        after["ranking_accuracy"],
        update,
    )
    assert online.metrics["ranking_accuracy"] == after["ranking_accuracy"] and "train_loss" in online.metrics
    rule.close()


def test_train_py_trains_a_served_prm_in_the_layout_its_prm_component_reads(server: Server, root: Path) -> None:
    """`--online_rm NAME` reads the model's kind from GET /v1/models: a PRM gets `prm_outcome` whatever
    --online_rm_method says, in the layout, separator and aggregate of the run's prm component when it names the
    model (--reward_options), else the component's default for the kind (trl for prm, step_tag for prm_lm); a layout
    that does not read the model's kind stops the script with the reason."""
    from trainer_client.train import VerifierScriptArguments, online_reward_model

    def online(name: str, **options: Any) -> Any:
        args = VerifierScriptArguments(
            online_rm=name, online_rm_method="pairs", verifier_url=server.url,
            reward_options=json.dumps({"prm": options}) if options else None,
        )  # fmt: skip
        return online_reward_model(args, [rule], str(root / "script"))

    rule = VerifierReward("math", base_url=server.url)
    found = online("prm")
    assert (found.method, found.outcome_from, found.layout) == ("prm_outcome", "math", "trl")
    found = online("qwen", model="qwen", layout="qwen_prm", separator=".\n", aggregate="last")
    assert (found.method, found.layout, found.separator, found.aggregate) == ("prm_outcome", "qwen_prm", ".\n", "last")
    assert found._reading() == {"layout": "qwen_prm", "separator": ".\n", "aggregate": "last"}
    assert online("qwen", model="prm", layout="qwen_prm").layout == "trl"  # the component reads another model
    found = online("shepherd", model="shepherd", step_tag="STEP", good_token="yes")
    assert (found.method, found.layout, found.step_tag, found.good_token) == ("prm_outcome", "step_tag", "STEP", "yes")
    assert online("shepherd").layout == "step_tag"
    for name, layout, kind in (("shepherd", "trl", "prm_lm"), ("qwen", "step_tag", "prm")):
        with pytest.raises(SystemExit, match=f"layout {layout} does not read a model of kind {kind}"):
            online(name, model=name, layout=layout)
    rule.close()


def test_a_checkpoint_of_the_other_head_is_refused_before_training(checkpoints: dict[str, Path], root: Path) -> None:
    """step_tag trains a causal LM, trl and qwen_prm a token classifier: a checkpoint saved as the other would load
    with a new random head, be trained so and served wrongly; the update refuses it, naming the layout."""
    for start, layout in (("a", "step_tag"), ("shepherd", "trl"), ("shepherd", "qwen_prm")):
        online = OnlineRewardModel(
            "m", checkpoint=checkpoints[start], output_dir=root / "refused", method="prm_outcome",
            layout=cast(Any, layout), base_url="http://127.0.0.1:9",
        )  # fmt: skip
        with pytest.raises(ValueError, match=f"layout {layout} trains a model saved as"):
            online._train_steps(arithmetic(2, seed=0), root / "refused" / "step-1")
