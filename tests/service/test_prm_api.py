"""The `prm` component through a real server, with tiny random-weight process reward models built here (no
downloads): every step score equals a direct transformers forward over the same checkpoint loaded back, on the ids
each layout gives (PRMTrainer's `tokenize_row`, Qwen2.5-Math-PRM's and Math-Shepherd's model cards), in batches of
mixed lengths, including a tokenizer that merges the separator into its neighbour when the steps are joined; a score
does not depend on its batch; a layout over max_tokens, steps holding the tag and a completion with no steps are null;
a model of the wrong kind is a 422 naming the field. Items that carry their token ids (completion_ids) get each
step's token range in them, read with the model's tokenizer or its policy_tokenizer, equal to a reference from every
prefix of the ids decoded, for characters of several tokens (Chinese, emoji) and steps that end inside a token; ids
that do not give the completion get none and the reason; items without ids in the same batch are as before."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("torch", reason="the `models` extra (torch, transformers) is not installed")

import torch
from transformers import AutoModelForCausalLM, AutoModelForTokenClassification, AutoTokenizer

from tests.conftest import MODEL_SERVER_READY_S, Server, running_server
from trainer_client.tiny_model import (
    build_process_reward_model,
    build_reward_model,
    build_tokenizer,
    gsm8k_rows,
    training_text,
)

MAX_TOKENS = 256
BOS = "<|im_start|>"
TAG = "<extra_0>"
QWEN_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
PROMPT = "Tom has 3 apples and buys 4 more. How many apples does Tom have now?"
COMPLETIONS = [
    "Tom has 3 + 4 = 7 apples.\n#### 7",
    "<think>3 + 4 = 7</think>\n\n  \nThe answer is 7.",  # an empty piece and one of only spaces: no steps
    "Tom has 3 apples.\nHe buys 4 more.\nSo he has 3 + 4 = 7 apples.\nThe answer is 7.\n",
    "7",
    "Tom has 12 apples.\nHe eats one.\nHe eats one.\nHe eats one.\nSo 9 apples are left.",
]


def build(path: Path, *, kind: str, split_words: bool = True, bos: bool = False, seed: int = 0) -> Path:
    """A process reward model (kind prm or prm_lm) or a reward model (rm) over a tiny BPE with `<extra_0>` as one
    token; with `bos`, the tokenizer has a BOS token (PRMTrainer's layout puts it first); without `split_words`, the
    BPE merges across word and whitespace boundaries."""
    path.mkdir()
    build_tokenizer(path, training_text(gsm8k_rows(300, seed=1)), split_words=split_words)
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.add_special_tokens({"additional_special_tokens": [BOS, TAG]})
    if bos:
        tokenizer.bos_token = BOS
    tokenizer.save_pretrained(path)
    if kind == "rm":
        build_reward_model(path, seed=seed, max_positions=512)
    else:
        build_process_reward_model(path, causal_lm=kind == "prm_lm", seed=seed, max_positions=512)
    return path


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("prm")
    return {
        "bos": build(root / "bos", kind="prm", bos=True, seed=0),
        "merging": build(root / "merging", kind="prm", split_words=False, seed=1),
        "shepherd": build(root / "shepherd", kind="prm_lm", seed=2),
        "outcome": build(root / "outcome", kind="rm", seed=3),
    }


KINDS = {"bos": "prm", "merging": "prm", "shepherd": "prm_lm", "outcome": "rm"}


@pytest.fixture(scope="module")
def prm_server(tmp_path_factory: pytest.TempPathFactory, checkpoints: dict[str, Path]) -> Iterator[Server]:
    models = {
        name: {"path": str(path), "kind": KINDS[name], "max_tokens": MAX_TOKENS, "batch_tokens": 2 * MAX_TOKENS}
        for name, path in checkpoints.items()
    }
    models["shepherd"]["policy_tokenizer"] = str(checkpoints["merging"])  # its items' ids are another tokenizer's
    settings: dict[str, Any] = {"math_workers": 1, "code_enabled": "false", "models": json.dumps(models)}
    with running_server(
        tmp_path_factory.mktemp("prm-server"), ready_timeout=MODEL_SERVER_READY_S, **settings
    ) as server:
        yield server


def score(server: Server, items: list[dict[str, Any]]) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/score", json={"items": items}, timeout=120)


def prm_results(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    return [result["components"]["prm"] for result in response.json()["results"]]


def steps_of(completion: str, separator: str = "\n") -> list[str]:
    return [piece for piece in completion.split(separator) if piece.strip()]


# The layouts, written from their sources: PRMTrainer.tokenize_row (trl <= 0.28, trl/trainer/prm_trainer.py), the
# model cards of Qwen/Qwen2.5-Math-PRM-7B and peiyi9979/math-shepherd-mistral-7b-prm. Each gives the ids and the
# positions the steps are read at.


def trl_layout(tokenizer: Any, prompt: str, steps: Sequence[str], separator: str) -> tuple[list[int], list[int]]:
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    separator_ids = tokenizer.encode(separator, add_special_tokens=False)
    completions_ids = [tokenizer(step, add_special_tokens=False)["input_ids"] + separator_ids for step in steps]
    if tokenizer.bos_token_id is not None:
        prompt_ids = [tokenizer.bos_token_id, *prompt_ids]
    ids, positions = list(prompt_ids), []
    for step_ids in completions_ids:
        ids += step_ids
        positions.append(len(ids) - 1)  # the label sits on the separator's last token
    return ids, positions


def qwen_layout(tokenizer: Any, prompt: str, steps: Sequence[str]) -> tuple[list[int], list[int]]:
    messages = [
        {"role": "system", "content": QWEN_SYSTEM},
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": TAG.join(steps) + TAG},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    ids = tokenizer.encode(text)
    tag = tokenizer.encode(TAG)[0]
    return ids, [position for position, token in enumerate(ids) if token == tag]


def shepherd_layout(tokenizer: Any, prompt: str, steps: Sequence[str]) -> tuple[list[int], list[int]]:
    output = "\n".join(f"{step} ки" for step in steps)
    ids = tokenizer.encode(f"{prompt} {output}")
    tag = tokenizer.encode("ки")[-1]
    return ids, [position for position, token in enumerate(ids) if token == tag]


@cache
def loaded(path: Path, causal_lm: bool) -> Any:
    auto = AutoModelForCausalLM if causal_lm else AutoModelForTokenClassification
    return auto.from_pretrained(path).eval()


def direct_steps(path: Path, ids: list[int], positions: list[int], candidates: list[int] | None = None) -> list[float]:
    """The step scores as transformers gives them for one unpadded sequence: softmax over the two labels, label 1;
    or, for a causal LM, softmax over the good and bad tokens' logits, the good one."""
    model = loaded(path, candidates is not None)
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids])).logits[0, positions]
    if candidates is not None:
        return [float(p) for p in logits[:, candidates].softmax(-1)[:, 0]]
    return [float(p) for p in logits.softmax(-1)[:, 1]]


def assert_matches(
    got: list[dict[str, Any]], want: list[list[float]], shifted: list[list[float]], completions: Sequence[str]
) -> None:
    """The served steps are the direct forward's (`want`), not those read one token early (`shifted`), with the
    steps' spans and the default aggregate, min."""
    assert [r["verdict"] for r in got] == ["scored"] * len(want)
    for result, steps, completion in zip(got, want, completions, strict=True):
        assert [s["score"] for s in result["steps"]] == pytest.approx(steps, abs=1e-4)
        assert [completion[s["start"] : s["end"]] for s in result["steps"]] == steps_of(completion)
        assert result["score"] == pytest.approx(min(steps), abs=1e-4)
    served = [s["score"] for result in got for s in result["steps"]]
    assert served != pytest.approx([score for steps in shifted for score in steps], abs=1e-3)


def early(positions: list[int]) -> list[int]:
    return [position - 1 for position in positions]


@pytest.mark.parametrize("model", ["bos", "merging"])
def test_trl_layout_scores_are_the_direct_forward_over_prm_trainers_ids(
    prm_server: Server, checkpoints: dict[str, Path], model: str
) -> None:
    items = [{"prompt": PROMPT, "completion": c, "prm": {"model": model, "layout": "trl"}} for c in COMPLETIONS]
    got = prm_results(score(prm_server, items))
    tokenizer = AutoTokenizer.from_pretrained(checkpoints[model])
    layouts = [trl_layout(tokenizer, PROMPT, steps_of(c), "\n") for c in COMPLETIONS]
    if model == "bos":
        assert all(ids[0] == tokenizer.bos_token_id for ids, _ in layouts)
    assert len({len(ids) for ids, _ in layouts}) == len(layouts) and max(len(ids) for ids, _ in layouts) <= MAX_TOKENS
    want = [direct_steps(checkpoints[model], ids, positions) for ids, positions in layouts]
    shifted = [direct_steps(checkpoints[model], ids, early(positions)) for ids, positions in layouts]
    assert_matches(got, want, shifted, COMPLETIONS)


def test_the_merging_tokenizer_lays_out_joined_text_otherwise(checkpoints: dict[str, Path]) -> None:
    """The premise of the `merging` case: tokenizing the joined steps merges the separator into a neighbouring
    token, so a PRM fed the joined text would be read at other tokens than PRMTrainer trained it on."""
    tokenizer = AutoTokenizer.from_pretrained(checkpoints["merging"])
    for completion in (COMPLETIONS[0], COMPLETIONS[2]):
        steps = steps_of(completion)
        separator = tokenizer.encode("\n", add_special_tokens=False)
        one_by_one = [i for step in steps for i in [*tokenizer.encode(step, add_special_tokens=False), *separator]]
        joined = tokenizer.encode("".join(step + "\n" for step in steps), add_special_tokens=False)
        assert joined != one_by_one
        assert len(joined) < len(one_by_one)  # merged: fewer tokens


@pytest.mark.parametrize("model", ["bos", "merging"])
def test_qwen_prm_layout_scores_are_the_direct_forward_over_the_model_cards_ids(
    prm_server: Server, checkpoints: dict[str, Path], model: str
) -> None:
    items = [{"prompt": PROMPT, "completion": c, "prm": {"model": model, "layout": "qwen_prm"}} for c in COMPLETIONS]
    got = prm_results(score(prm_server, items))
    tokenizer = AutoTokenizer.from_pretrained(checkpoints[model])
    layouts = [qwen_layout(tokenizer, PROMPT, steps_of(c)) for c in COMPLETIONS]
    assert [len(positions) for _, positions in layouts] == [len(steps_of(c)) for c in COMPLETIONS]
    assert len({len(ids) for ids, _ in layouts}) > 3 and max(len(ids) for ids, _ in layouts) <= MAX_TOKENS
    want = [direct_steps(checkpoints[model], ids, positions) for ids, positions in layouts]
    shifted = [direct_steps(checkpoints[model], ids, early(positions)) for ids, positions in layouts]
    assert_matches(got, want, shifted, COMPLETIONS)


def test_step_tag_layout_scores_are_the_direct_forward_over_math_shepherds_ids(
    prm_server: Server, checkpoints: dict[str, Path]
) -> None:
    items = [
        {"prompt": PROMPT, "completion": c, "prm": {"model": "shepherd", "layout": "step_tag"}} for c in COMPLETIONS
    ]
    got = prm_results(score(prm_server, items))
    tokenizer = AutoTokenizer.from_pretrained(checkpoints["shepherd"])
    layouts = [shepherd_layout(tokenizer, PROMPT, steps_of(c)) for c in COMPLETIONS]
    assert [len(positions) for _, positions in layouts] == [len(steps_of(c)) for c in COMPLETIONS]
    assert len({len(ids) for ids, _ in layouts}) > 3 and max(len(ids) for ids, _ in layouts) <= MAX_TOKENS
    candidates = [tokenizer.encode(token, add_special_tokens=False)[-1] for token in ("+", "-")]
    want = [direct_steps(checkpoints["shepherd"], ids, positions, candidates) for ids, positions in layouts]
    shifted = [direct_steps(checkpoints["shepherd"], ids, early(positions), candidates) for ids, positions in layouts]
    assert_matches(got, want, shifted, COMPLETIONS)


def test_the_aggregates(prm_server: Server) -> None:
    completion = COMPLETIONS[2]
    items = [
        {"prompt": PROMPT, "completion": completion, "prm": {"model": "bos", "aggregate": how}}
        for how in ("min", "last", "mean", "prod")
    ]
    low, last, mean, prod = prm_results(score(prm_server, items))
    steps = [s["score"] for s in low["steps"]]
    assert len(steps) == 4 and all(r["steps"] == low["steps"] for r in (last, mean, prod))
    assert low["score"] == min(steps) and last["score"] == steps[-1]
    assert mean["score"] == pytest.approx(sum(steps) / 4) and prod["score"] == pytest.approx(math.prod(steps))


@pytest.mark.parametrize(("model", "layout"), [("bos", "trl"), ("merging", "qwen_prm"), ("shepherd", "step_tag")])
def test_a_score_does_not_depend_on_its_batch(prm_server: Server, model: str, layout: str) -> None:
    spec = {"model": model, "layout": layout}
    item = {"prompt": PROMPT, "completion": COMPLETIONS[2], "prm": spec}
    others = [{"prompt": PROMPT, "completion": "He eats one.\n" * n, "prm": spec} for n in (1, 3, 6)]
    [alone] = prm_results(score(prm_server, [item]))
    among = prm_results(score(prm_server, [*others[:2], item, others[2]]))[2]
    assert [s["score"] for s in among["steps"]] == pytest.approx([s["score"] for s in alone["steps"]], abs=1e-3)


@pytest.mark.parametrize(("model", "layout"), [("bos", "trl"), ("merging", "qwen_prm"), ("shepherd", "step_tag")])
def test_a_layout_over_max_tokens_is_null_never_cut(prm_server: Server, model: str, layout: str) -> None:
    long = "Tom has 3 + 4 = 7 apples.\n" * 40  # far over MAX_TOKENS
    short = {"prompt": PROMPT, "completion": COMPLETIONS[0], "prm": {"model": model, "layout": layout}}
    response = score(prm_server, [{**short, "completion": long}, short])
    over, fine = prm_results(response)
    assert (over["score"], over["verdict"], over.get("steps")) == (None, "too_long", None)
    assert over["model_version"] and fine["verdict"] == "scored"
    assert [r["reward"] for r in response.json()["results"]] == [None, fine["score"]]


def test_no_steps_and_steps_holding_the_tag_are_null(prm_server: Server) -> None:
    items = [
        {"completion": "\n \n\n", "prm": {"model": "bos"}},
        {"completion": f"3 + 4 = 7{TAG}\nSo 7.", "prm": {"model": "bos", "layout": "qwen_prm"}},
        {"completion": "3 + 4 = 7 ки\nSo 7.", "prm": {"model": "shepherd", "layout": "step_tag"}},
        {"completion": "3 + 4 = 7\nSo 7.", "prm": {"model": "bos", "layout": "qwen_prm"}},
    ]
    empty, tagged_qwen, tagged_shepherd, fine = prm_results(score(prm_server, items))
    assert (empty["score"], empty["verdict"]) == (None, "no_steps")
    assert (tagged_qwen["score"], tagged_qwen["verdict"]) == (None, "bad_layout")
    assert (tagged_shepherd["score"], tagged_shepherd["verdict"]) == (None, "bad_layout")
    assert fine["verdict"] == "scored" and len(fine["steps"]) == 2


def test_results_carry_the_model_version_that_models_lists(prm_server: Server, checkpoints: dict[str, Path]) -> None:
    listed = {m["name"]: m for m in httpx.get(f"{prm_server.url}/v1/models", timeout=10).json()["models"]}
    assert {name: m["kind"] for name, m in listed.items()} == KINDS
    [result] = prm_results(score(prm_server, [{"completion": "7", "prm": {"model": "merging"}}]))
    assert result["model_version"] == listed["merging"]["version"]


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"prm": {"model": "not_served_here"}}, "items.0.prm.model"),
        ({"prm": {"model": "outcome"}}, "items.0.prm.model"),  # an rm model
        ({"prm": {"model": "shepherd", "layout": "trl"}}, "items.0.prm.model"),  # a causal LM: step_tag only
        ({"prm": {"model": "bos", "layout": "step_tag"}}, "items.0.prm.model"),  # token classification: not step_tag
        ({"rm": {"model": "bos"}}, "items.0.rm.model"),  # a prm model for rm
        ({"prm": {"model": "bos", "layout": "nope"}}, "items.0.prm.layout"),
        ({"prm": {"model": "bos", "separator": ""}}, "items.0.prm.separator"),
        ({"prm": {"model": "bos"}, "math": {"gold": "7"}}, "items.0"),  # at the rule's weight: the order guard
    ],
)
def test_bad_prm_items_are_a_422_naming_the_field(prm_server: Server, item: dict[str, Any], field: str) -> None:
    response = score(prm_server, [{"completion": "7", **item}])
    assert response.status_code == 422, response.text
    assert [e["loc"] for e in response.json()["errors"]] == [field]
    assert "not_served_here" not in response.text and "nope" not in response.text


def test_gated_on_the_rule_prm_scores_only_right_answers(prm_server: Server) -> None:
    """prm takes rm's gate: a wrong answer is 0 (gated_out) and never reaches the model (no steps, no version); a
    right one gets the model's steps and score, as without the gate."""
    completions = ["3 + 4 = 7\nSo \\boxed{7}.", "3 + 4 = 8\nSo \\boxed{8}."]
    gated = [{"prompt": PROMPT, "completion": c, "math": {"gold": "7"}, "prm": {"model": "bos", "gate": "right"},
              "weights": {"prm": 5.0}} for c in completions]  # fmt: skip
    right, wrong = prm_results(score(prm_server, gated))
    [alone] = prm_results(
        score(prm_server, [{"prompt": PROMPT, "completion": completions[0], "prm": {"model": "bos"}}])
    )
    assert right["verdict"] == "scored" and right["score"] == pytest.approx(alone["score"], abs=1e-9)
    assert right["steps"] == alone["steps"]
    assert (wrong["score"], wrong["verdict"]) == (0.0, "gated_out")
    assert "steps" not in wrong and "model_version" not in wrong


# --- token indices: the steps in the item's own ids ---------------------------------------------------------------

TOKEN_COMPLETIONS = [
    "汤姆有3个苹果。\n他又买了4个🍎🍎。\n\n所以他有7个 🙂\n答案是7",  # characters of several byte tokens
    "Tom has 3 apples.\nHe buys 4 more.\nSo he has 3 + 4 = 7 apples.\nThe answer is 7.\n",
    "\n\nNaïve café: 3 + 4 = 7 €.\n👍🏽 The answer is 7.",
]


def policy_ids(path: Path, completion: str) -> list[int]:
    """The ids a policy generated the completion as: its tokens, and the EOS that TRL's completion_ids keep."""
    tokenizer = AutoTokenizer.from_pretrained(path)
    return [*tokenizer(completion, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id]


def token_reference(path: Path, ids: list[int], completion: str) -> list[tuple[int, int]]:
    """Each step's token range from every prefix of the ids decoded (quadratic: the test's inputs are short): it
    starts at the last token whose prefix has begun at most its first character (a character cut short decodes to
    U+FFFD) and ends after the first prefix that holds its last character whole."""
    tokenizer = AutoTokenizer.from_pretrained(path)
    whole, begun = [], []
    for k in range(len(ids) + 1):
        decoded = str(tokenizer.decode(ids[:k], skip_special_tokens=True))
        kept = decoded.rstrip("\ufffd")
        assert completion.startswith(kept)
        whole.append(len(kept))
        begun.append(len(kept) + (decoded != kept))
    ranges = []
    start = 0
    for step in steps_of(completion):
        start = completion.index(step, start)
        end = start + len(step)
        first = max(k for k in range(len(ids)) if begun[k] <= start)
        ranges.append((first, min(k for k in range(len(ids) + 1) if whole[k] >= end)))
        start = end
    return ranges


@pytest.mark.parametrize(
    ("model", "layout", "policy"), [("bos", "trl", "bos"), ("merging", "qwen_prm", "merging"),
                                    ("shepherd", "step_tag", "merging")],
)  # fmt: skip
def test_steps_carry_their_token_ranges_in_the_items_ids(
    prm_server: Server, checkpoints: dict[str, Path], model: str, layout: str, policy: str
) -> None:
    """With completion_ids, each step's [token_start, token_end) equals the reference over the policy's tokenizer
    (the model's own, or its policy_tokenizer: shepherd's is merging's); without, the same item has none; the scores
    are the same either way, and in a batch mixing both. (Math-Shepherd's tag, Cyrillic, is found by its last byte
    token, which Chinese characters hold too: shepherd lays those out bad_layout, and is given the others.)"""
    completions = TOKEN_COMPLETIONS[1:] if model == "shepherd" else TOKEN_COMPLETIONS
    items: list[dict[str, Any]] = []
    for completion in completions:
        ids = policy_ids(checkpoints[policy], completion)
        spec = {"model": model, "layout": layout}
        items += [{"prompt": PROMPT, "completion": completion, "completion_ids": ids, "prm": spec},
                  {"prompt": PROMPT, "completion": completion, "prm": spec}]  # fmt: skip
    results = prm_results(score(prm_server, items))
    for index, completion in enumerate(completions):
        carried, bare = results[2 * index], results[2 * index + 1]
        assert carried["verdict"] == bare["verdict"] == "scored"
        want = token_reference(checkpoints[policy], items[2 * index]["completion_ids"], completion)
        assert [(s["token_start"], s["token_end"]) for s in carried["steps"]] == want
        assert [(s["start"], s["end"], s["score"]) for s in carried["steps"]] == [
            (s["start"], s["end"], s["score"]) for s in bare["steps"]
        ]
        assert all("token_start" not in s and "token_end" not in s for s in bare["steps"])
        assert carried["detail"] == bare["detail"] and "token" not in bare["detail"]


def test_the_cases_the_token_ranges_are_for_occur(checkpoints: dict[str, Path]) -> None:
    """A character spread over several tokens (the first completion) and a step ending inside a token (merging's
    `.\n`): the ranges above were checked on both."""
    tokenizer = AutoTokenizer.from_pretrained(checkpoints["bos"])
    chinese = tokenizer(TOKEN_COMPLETIONS[0], add_special_tokens=False)["input_ids"]
    assert len(chinese) > len(TOKEN_COMPLETIONS[0]) + 10
    merging = AutoTokenizer.from_pretrained(checkpoints["merging"])
    tokens = merging.convert_ids_to_tokens(merging(TOKEN_COMPLETIONS[1], add_special_tokens=False)["input_ids"])
    assert ".Ċ" in tokens  # "." and "\n" in one token: a step ends inside it


def test_ids_that_do_not_give_the_completion_get_no_token_ranges_and_the_reason(
    prm_server: Server, checkpoints: dict[str, Path]
) -> None:
    completion = TOKEN_COMPLETIONS[1]
    ids = policy_ids(checkpoints["bos"], completion)
    other = policy_ids(checkpoints["bos"], completion.replace("Tom", "Tim"))
    items = [{"completion": completion, "completion_ids": wrong, "prm": {"model": "bos"}}
             for wrong in (ids[:-4], other, [*ids[:-1], 10**6])]  # fmt: skip
    items.append({"completion": completion, "completion_ids": ids, "prm": {"model": "bos"}})
    *wrong, right = prm_results(score(prm_server, items))
    for result, why in zip(wrong, ["do not decode to the completion"] * 2 + ["not in the tokenizer's vocabulary"],
                           strict=True):  # fmt: skip
        assert result["verdict"] == "scored" and len(result["steps"]) == 4
        assert all("token_start" not in s for s in result["steps"])
        assert result["detail"].endswith(f"; no token indices: the token ids {why}") or why in result["detail"]
        assert [s["score"] for s in result["steps"]] == [s["score"] for s in right["steps"]]
    assert all("token_start" in s for s in right["steps"])


@pytest.mark.parametrize(
    ("ids", "loc"),
    [("1 2 3", ["items", 0, "completion_ids"]), ([1, "secret-value"], ["items", 0, "completion_ids", 1]),
     ([1, 2.5], ["items", 0, "completion_ids", 1]), ([-7], ["items", 0, "completion_ids", 0])],
)  # fmt: skip
def test_completion_ids_of_the_wrong_type_are_a_422_naming_the_field(
    prm_server: Server, ids: Any, loc: list[Any]
) -> None:
    response = score(prm_server, [{"completion": "7", "completion_ids": ids, "prm": {"model": "bos"}}])
    assert response.status_code == 422, response.text
    assert [e["loc"] for e in response.json()["errors"]] == [".".join(map(str, loc))]
    assert "secret-value" not in response.text and "1 2 3" not in response.text and "2.5" not in response.text
