"""The `rm` component through a real server, with tiny random-weight reward models built here (no downloads): every
score equals a direct transformers forward over the same checkpoint loaded back, on the token ids TRL's RewardTrainer
trains on (raw and chat), in batches of mixed lengths; a score does not depend on its batch; overflow keeps the end
or is null; an unknown model is a 422 naming the field; beside a rule, the order guard refuses what could lift a
wrong answer and accepts the two recipes (squashed under the rule; gated on it, where a wrong answer never reaches
the model); /v1/models and /readyz show the models; and a server with no models never imports torch."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("torch", reason="the `models` extra (torch, transformers) is not installed")
pytest.importorskip("trl", reason="the expected layouts come from TRL's own tokenizing function")

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer
from trl.data_utils import _tokenize  # RewardTrainer's tokenizing: the layout the served model was trained on

from tests.conftest import MODEL_SERVER_READY_S, ROOT, Server, running_server
from trainer_client.tiny_model import CHAT_TEMPLATE, build_reward_model, build_tokenizer, gsm8k_rows, training_text

MAX_TOKENS = 96
BOS = "<|im_start|>"
# The tiny tokenizer's chat template, refusing one message: a template that cannot render an input is model_error.
FAILING_TEMPLATE = "{%- for m in messages %}{%- if 'BOOM' in m['content'] %}{{ raise_exception('no') }}{%- endif %}" \
                   "{%- endfor %}" + CHAT_TEMPLATE  # fmt: skip
PROMPT = "Tom has 3 apples and buys 4 more. How many apples does Tom have now?"
COMPLETIONS = ["7", "<think>3 + 4 = 7</think>The answer is 7.", "Tom has 3 + 4 = 7 apples.\n#### 7", "12 apples " * 3]


def build(path: Path, *, pad_is_eos: bool, seed: int) -> Path:
    """A reward model whose tokenizer adds a BOS (so `raw` and `chat` differ in their special tokens too); with
    `pad_is_eos`, padding is EOS, as RewardTrainer sets it when the tokenizer has none."""
    from tokenizers import processors

    path.mkdir()
    build_tokenizer(path, training_text(gsm8k_rows(100, seed=1)))
    tokenizer = AutoTokenizer.from_pretrained(path)
    bos_id = tokenizer.convert_tokens_to_ids(BOS)
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
    )
    tokenizer.bos_token = BOS
    tokenizer.chat_template = FAILING_TEMPLATE
    if pad_is_eos:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.save_pretrained(path)
    build_reward_model(path, seed=seed, max_positions=256)
    return path


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("rm")
    return {
        "tiny": build(root / "tiny", pad_is_eos=False, seed=0),
        "eos_pad": build(root / "eos", pad_is_eos=True, seed=1),
    }


@pytest.fixture(scope="module")
def rm_server(tmp_path_factory: pytest.TempPathFactory, checkpoints: dict[str, Path]) -> Iterator[Server]:
    models = {
        name: {"path": str(path), "max_tokens": MAX_TOKENS, "batch_tokens": 4 * MAX_TOKENS}
        for name, path in checkpoints.items()
    }
    settings: dict[str, Any] = {"math_workers": 1, "code_enabled": "false", "models": json.dumps(models)}
    with running_server(tmp_path_factory.mktemp("rm-server"), ready_timeout=MODEL_SERVER_READY_S, **settings) as server:
        yield server


def score(server: Server, items: list[dict[str, Any]]) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/score", json={"items": items}, timeout=120)


def expected_ids(tokenizer: Any, template: str, prompt: str, completion: str) -> list[int]:
    """RewardTrainer's ids for a row: EOS appended to a non-conversational completion, then TRL's `_tokenize`."""
    if template == "chat":
        turns = [{"role": "user", "content": prompt}, {"role": "assistant", "content": completion}]
        return list(_tokenize(tokenizer, turns)["input_ids"])
    eos = tokenizer.eos_token
    return list(
        _tokenize(tokenizer, prompt + (completion if completion.endswith(eos) else completion + eos))["input_ids"]
    )


def direct_score(path: Path, ids: list[int]) -> float:
    """The model's score as transformers gives it for one unpadded sequence."""
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    with torch.inference_mode():
        return float(model(input_ids=torch.tensor([ids])).logits[0, 0])


def rm_result(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    return [result["components"]["rm"] for result in response.json()["results"]]


@pytest.mark.parametrize("model", ["tiny", "eos_pad"])
def test_every_score_is_the_direct_forward_over_reward_trainers_layout(
    rm_server: Server, checkpoints: dict[str, Path], model: str
) -> None:
    cases = [(template, completion) for template in ("raw", "chat") for completion in COMPLETIONS]
    items = [{"prompt": PROMPT, "completion": c, "rm": {"model": model, "template": t}} for t, c in cases]
    got = rm_result(score(rm_server, items))
    tokenizer = AutoTokenizer.from_pretrained(checkpoints[model])
    layouts = [expected_ids(tokenizer, template, PROMPT, completion) for template, completion in cases]
    assert all(ids[0] == tokenizer.bos_token_id for (t, _), ids in zip(cases, layouts, strict=True) if t == "raw")
    assert len({len(ids) for ids in layouts}) > 4 and max(map(len, layouts)) <= MAX_TOKENS  # mixed lengths, none cut
    want = [direct_score(checkpoints[model], ids) for ids in layouts]
    assert [r["verdict"] for r in got] == ["scored"] * len(cases)
    assert [r["score"] for r in got] == pytest.approx(want, abs=1e-4)
    assert max(want) - min(want) > 0.1  # the scores differ: a score read at the wrong token would not match them


def test_a_score_does_not_depend_on_its_batch(rm_server: Server) -> None:
    item = {"prompt": PROMPT, "completion": COMPLETIONS[1], "rm": {"model": "tiny"}}
    others = [{"prompt": PROMPT * n, "completion": "x " * 9 * n, "rm": {"model": "tiny"}} for n in (1, 2, 3)]
    [alone] = rm_result(score(rm_server, [item]))
    among = rm_result(score(rm_server, [*others[:2], item, others[2]]))[2]
    assert among["score"] == pytest.approx(alone["score"], abs=1e-3)


def test_the_trl_reward_sends_its_prompts_to_the_model_and_shows_its_observers(
    rm_server: Server, checkpoints: dict[str, Path]
) -> None:
    """GRPOTrainer hands reward functions the prompts: a reward with rm sends them, so the model scores the prompt
    and the completion as it was trained to (without them it would see the completion alone)."""
    from trainer_client import VerifierReward

    reward = VerifierReward("rm", base_url=rm_server.url, options={"rm": {"model": "tiny"}})
    seen: list[tuple[Any, ...]] = []
    reward.add_observer(lambda prompts, completions, results, kwargs: seen.append((prompts, completions, results)))
    prompts, completions = [PROMPT, "What is 2 + 2?"], [COMPLETIONS[1]] * 2
    got = reward(prompts=prompts, completions=completions, completion_ids=None)
    tokenizer = AutoTokenizer.from_pretrained(checkpoints["tiny"])
    path = checkpoints["tiny"]
    want = [direct_score(path, expected_ids(tokenizer, "raw", p, c)) for p, c in zip(prompts, completions, strict=True)]
    assert got == pytest.approx(want, abs=1e-4)
    assert abs(want[0] - want[1]) > 1e-3  # the prompt changes the score: it was sent
    [(seen_prompts, seen_completions, results)] = seen
    assert seen_prompts == prompts and seen_completions == completions
    assert [result.components["rm"].score for result in results] == pytest.approx(want, abs=1e-4)
    reward.close()


def test_an_input_over_max_tokens_keeps_its_end_or_is_null(rm_server: Server, checkpoints: dict[str, Path]) -> None:
    long = "Tom has 3 + 4 = 7 apples. " * 20  # far over MAX_TOKENS
    items = [
        {"prompt": PROMPT, "completion": long, "rm": {"model": "tiny"}},
        {"prompt": PROMPT, "completion": long, "rm": {"model": "tiny", "on_overflow": "null"}},
    ]
    response = score(rm_server, items)
    kept, refused = rm_result(response)
    ids = expected_ids(AutoTokenizer.from_pretrained(checkpoints["tiny"]), "raw", PROMPT, long)
    assert len(ids) > MAX_TOKENS
    assert kept["verdict"] == "scored"
    assert kept["score"] == pytest.approx(direct_score(checkpoints["tiny"], ids[-MAX_TOKENS:]), abs=1e-4)
    assert (refused["score"], refused["verdict"]) == (None, "too_long")
    assert [r["reward"] for r in response.json()["results"]][1] is None


def test_sigmoid_squashes_the_logit_and_says_it(rm_server: Server) -> None:
    items = [{"prompt": PROMPT, "completion": "7", "rm": {"model": "tiny", "transform": t}} for t in ("raw", "sigmoid")]
    raw, squashed = rm_result(score(rm_server, items))
    assert squashed["score"] == pytest.approx(1 / (1 + math.exp(-raw["score"])), abs=1e-9)
    assert squashed["detail"] == f"logit {raw['score']:.6g}"


def test_an_input_the_model_cannot_take_is_null_never_zero(rm_server: Server) -> None:
    items = [
        {"prompt": PROMPT, "completion": "BOOM", "rm": {"model": "tiny", "template": "chat"}},
        {"prompt": PROMPT, "completion": "7", "rm": {"model": "tiny", "template": "chat"}},
    ]
    failed, fine = rm_result(score(rm_server, items))
    assert (failed["score"], failed["verdict"]) == (None, "model_error")
    assert fine["verdict"] == "scored"


def test_results_carry_the_model_version_that_models_lists(rm_server: Server, checkpoints: dict[str, Path]) -> None:
    listed = httpx.get(f"{rm_server.url}/v1/models", timeout=10).json()["models"]
    assert [(m["name"], m["kind"], m["path"], m["device"], m["loaded"]) for m in listed] == [
        (name, "rm", str(path), "cpu", True) for name, path in checkpoints.items()
    ]
    assert all(m["version"] for m in listed) and listed[0]["version"] != listed[1]["version"]
    ready = httpx.get(f"{rm_server.url}/readyz", timeout=10)
    assert ready.status_code == 200
    assert {name: (m["loaded"], m["device"], m["version"]) for name, m in ready.json()["models"].items()} == {
        m["name"]: (True, "cpu", m["version"]) for m in listed
    }
    [result] = rm_result(score(rm_server, [{"completion": "7", "rm": {"model": "eos_pad"}}]))
    assert result["model_version"] == listed[1]["version"]


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"rm": {"model": "not_served_here"}}, "items.0.rm.model"),
        ({"rm": {"model": "tiny", "template": "nope"}}, "items.0.rm.template"),
        ({"rm": {"model": "tiny"}, "math": {"gold": "7"}}, "items.0"),  # raw logits beside a rule: the order guard
    ],
)
def test_bad_rm_items_are_a_422_naming_the_field(rm_server: Server, item: dict[str, Any], field: str) -> None:
    response = score(rm_server, [{"completion": "7", **item}])
    assert response.status_code == 422, response.text
    assert [e["loc"] for e in response.json()["errors"]] == [field]
    assert "not_served_here" not in response.text


def test_beside_a_rule_with_allow_order_inversion_anything_goes_through(rm_server: Server) -> None:
    """Raw logits at a weight far above the rule's: refused by the guard, scored when the item allows it."""
    items = [
        {"prompt": PROMPT, "completion": c, "math": {"gold": "7"}, "rm": {"model": "tiny"}, "weights": {"rm": 5.0},
         "allow_order_inversion": True}
        for c in ("\\boxed{7}", "\\boxed{12}")
    ]  # fmt: skip
    results = score(rm_server, items).json()["results"]
    assert [r["components"]["math"]["score"] for r in results] == [1.0, 0.0]
    for result in results:
        assert result["components"]["rm"]["verdict"] == "scored"
        assert result["reward"] == pytest.approx(
            result["components"]["math"]["score"] + 5 * result["components"]["rm"]["score"]
        )


# --- A model beside the rules: the order guard and its two recipes --------------------------------------------------
RIGHT = [
    "\\boxed{7}",
    "3 + 4 = 7, so the answer is \\boxed{7}.",
    "Tom has 3 + 4 = 7 apples.\n#### 7",
    "7 apples: \\boxed{7}",
]
WRONG = ["\\boxed{12}", "3 + 4 = 8, so the answer is \\boxed{8}.", "Tom has 12 apples.\n#### 12", "no idea", "12 " * 30]


def ranked(
    server: Server, rm: dict[str, Any], weights: dict[str, float], template: str = "raw"
) -> list[dict[str, Any]]:
    items = [
        {"prompt": PROMPT, "completion": c, "math": {"gold": "7"}, "rm": {"model": "tiny", "template": template, **rm},
         "weights": weights}
        for c in RIGHT + WRONG
    ]  # fmt: skip
    response = score(server, items)
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    assert [r["components"]["math"]["score"] for r in results] == [1.0] * len(RIGHT) + [0.0] * len(WRONG)
    return results


def test_squashed_under_the_rule_the_model_ranks_within_the_verdict(rm_server: Server) -> None:
    results = ranked(rm_server, {"transform": "sigmoid"}, {"math": 1.0, "rm": 0.5})
    model = [r["components"]["rm"] for r in results]
    assert {m["verdict"] for m in model} == {"scored"}  # the model scored every answer, wrong ones included
    rewards = [r["reward"] for r in results]
    assert rewards == pytest.approx([float(i < len(RIGHT)) + 0.5 * m["score"] for i, m in enumerate(model)])
    assert min(rewards[: len(RIGHT)]) > max(rewards[len(RIGHT) :])
    assert len({m["score"] for m in model}) > 3  # it does rank: the model's scores differ within each verdict


def test_gated_on_the_rule_the_model_never_sees_a_wrong_answer(rm_server: Server) -> None:
    """The chat template refuses any text holding BOOM (model_error when the model is run): a wrong answer holding
    it is gated_out, so the model never saw it; a right one holding it is model_error, so right answers do reach
    the model. Right answers get the model's sigmoid, the same as when asked without the gate."""
    gate = {"transform": "sigmoid", "gate": "right"}
    results = ranked(rm_server, gate, {"rm": 3.0}, template="chat")
    right, wrong = results[: len(RIGHT)], results[len(RIGHT) :]
    assert all((r["components"]["rm"]["score"], r["components"]["rm"]["verdict"]) == (0.0, "gated_out") for r in wrong)
    assert all("model_version" not in r["components"]["rm"] and r["reward"] == 0.0 for r in wrong)
    alone = rm_result(score(rm_server, [{"prompt": PROMPT, "completion": c, "rm": {"model": "tiny", "template": "chat",
                                                                                     "transform": "sigmoid"}}
                                        for c in RIGHT]))  # fmt: skip
    assert [r["components"]["rm"]["score"] for r in right] == pytest.approx([a["score"] for a in alone], abs=1e-9)
    assert all(r["components"]["rm"]["verdict"] == "scored" and r["components"]["rm"]["model_version"] for r in right)
    assert [r["reward"] for r in right] == pytest.approx([1.0 + 3.0 * a["score"] for a in alone])
    boom = [{"prompt": PROMPT, "completion": f"BOOM {c}", "math": {"gold": "7"},
             "rm": {"model": "tiny", "template": "chat", **gate}} for c in ("\\boxed{12}", "\\boxed{7}")]  # fmt: skip
    gated_out, refused = rm_result(score(rm_server, boom))
    assert (gated_out["score"], gated_out["verdict"]) == (0.0, "gated_out")
    assert (refused["score"], refused["verdict"]) == (None, "model_error")


def test_the_gate_reads_a_text_rule_in_a_batch_scored_by_the_workers(rm_server: Server) -> None:
    """64 items or more with text components are scored in worker chunks: the model's round waits for them."""
    answers = ["\\boxed{A}", "\\boxed{B}"] * 40
    items = [{"prompt": PROMPT, "completion": a, "choice": {"gold": "A"}, "format": {},
              "rm": {"model": "tiny", "transform": "sigmoid", "gate": "right"}} for a in answers]  # fmt: skip
    results = score(rm_server, items).json()["results"]
    verdicts = [(r["components"]["choice"]["verdict"], r["components"]["rm"]["verdict"]) for r in results]
    assert verdicts == [("correct", "scored"), ("wrong", "gated_out")] * 40
    assert all(r["reward"] is not None for r in results)


def test_the_gate_makes_an_answer_the_rule_could_not_judge_null(rm_server: Server) -> None:
    item = {"completion": "\\boxed{7}", "math": {"gold": "\\frac{"}, "rm": {"model": "tiny", "transform": "sigmoid",
                                                                                 "gate": "right"}}  # fmt: skip
    [result] = score(rm_server, [item]).json()["results"]
    assert result["components"]["math"]["verdict"] == "gold_unparseable"
    assert (result["components"]["rm"]["score"], result["components"]["rm"]["verdict"]) == (None, "primary_unjudged")
    assert result["reward"] is None


@pytest.mark.parametrize(
    "item",
    [
        {"math": {"gold": "7"}, "rm": {"model": "tiny"}, "weights": {"rm": 0.123456}},  # raw logits: any weight
        {"math": {"gold": "7"}, "rm": {"model": "tiny", "transform": "sigmoid"}},  # sigmoid at the rule's weight
        {"code": {"tests": ["assert True"]}, "rm": {"model": "tiny", "transform": "sigmoid"},
         "weights": {"rm": 0.123456}},  # partial credit: squashing is not enough
    ],
)  # fmt: skip
def test_a_model_that_could_lift_a_wrong_answer_is_refused(rm_server: Server, item: dict[str, Any]) -> None:
    response = score(rm_server, [{"completion": "7", **item}])
    assert response.status_code == 422, response.text
    [error] = response.json()["errors"]
    assert error["loc"] == "items.0"
    rule = "math" if "math" in item else "code"
    assert f"({rule} with rm)" in error["msg"] and 'gate "right"' in error["msg"]
    assert "0.123456" not in response.text and "tiny" not in response.text


def readme_recipes() -> list[dict[str, Any]]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### A model beside the rules", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", section, re.S)]


def test_the_readme_recipes_are_accepted_and_keep_right_above_wrong(rm_server: Server) -> None:
    """The README's items, as written (its model renamed to this server's), with a wrong answer beside each."""
    recipes = readme_recipes()
    assert len(recipes) == 2
    for recipe in recipes:
        assert recipe["rm"].pop("model") == "helpful"
        right = {**recipe, "rm": {**recipe["rm"], "model": "tiny"}}
        wrong = {**right, "completion": "3 + 4 = 8, so \\boxed{8}."}
        response = score(rm_server, [right, wrong])
        assert response.status_code == 200, response.text
        good, bad = response.json()["results"]
        assert good["reward"] > bad["reward"] and good["components"]["rm"]["verdict"] == "scored"


def test_a_model_that_cannot_be_loaded_stops_the_server_starting(tmp_path: Path) -> None:
    models = {"gone": {"path": str(tmp_path / "missing")}}
    settings: dict[str, Any] = {"math_workers": 1, "code_enabled": "false", "models": json.dumps(models)}
    with pytest.raises(RuntimeError, match="model 'gone': cannot load"), running_server(tmp_path, **settings):
        pass


IMPORTS_OF_A_SERVICE = """
import sys
from fastapi.testclient import TestClient
from verifier_service.app import create_app
from verifier_service.settings import VerifierSettings
settings = VerifierSettings(math_workers=1, code_enabled=False, models=json.loads(sys.argv[1]))
with TestClient(create_app(settings)) as client:
    assert client.get("/readyz").status_code == 200
    print(json.dumps({"torch": "torch" in sys.modules, "models": client.get("/v1/models").json()["models"]}))
"""


def test_a_service_without_models_never_imports_torch(checkpoints: dict[str, Path]) -> None:
    def started(models: dict[str, Any]) -> dict[str, Any]:
        code = "import json\n" + IMPORTS_OF_A_SERVICE
        run = subprocess.run(
            [sys.executable, "-c", code, json.dumps(models)], cwd=ROOT, capture_output=True, timeout=300
        )
        assert run.returncode == 0, run.stderr.decode()
        return dict(json.loads(run.stdout.decode().strip().splitlines()[-1]))

    assert started({}) == {"torch": False, "models": []}
    with_one = started({"tiny": {"path": str(checkpoints["tiny"])}})
    assert with_one["torch"] is True and [m["name"] for m in with_one["models"]] == ["tiny"]
