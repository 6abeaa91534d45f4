"""The documentation points only at files that exist: every link, every backticked path and every *.md named in a
Markdown file of the repository resolves, except references to other projects' files, listed here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Files that are not this repository's to hold: other projects' files our docs cite by their path there, and files that
# exist only while the project runs.
ELSEWHERE = {
    "trl/rewards/accuracy_rewards.py",  # huggingface/trl, in bench/README.md
    "tests/test_all.py",  # huggingface/Math-Verify, in tests/data/README.md
    "resources_servers/structured_outputs/tests/test_app.py",  # NVIDIA-NeMo/Gym, in tests/data/README.md
    # google-research, allenai/open-instruct, NLTK's punkt and NVIDIA-NeMo/Gym, in tests/data/instructions/
    "instruction_following_eval/data/input_response_data_gpt4_20231107_145030.jsonl",
    "instructions_util.py",
    "open_instruct/IFEvalG/instructions.py",
    "punkt/data/english.py",
    "resources_servers/instruction_following/data/example_rollouts.jsonl",
    "bench/results/",  # git-ignored: where the benchmarks write their JSON
    "main.py",  # the program's file, written inside the sandbox for each test (sandbox/README.md)
}
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
# `a/b.py`, `b.md`, `a/b/` (a folder); not `rewards/x/mean` (a metric) or `40/9`.
CODE_PATH = re.compile(r"`([\w.-]+(?:/[\w.-]+)*\.(?:md|py|ya?ml|sh|toml|jsonl|cfg)|[\w.-]+(?:/[\w.-]+)*/)`")
DOC_NAME = re.compile(r"\b([\w-]+\.md)\b")


def markdown_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / name for name in listed.stdout.split()]


def references(text: str) -> set[str]:
    found = set(LINK.findall(text)) | set(CODE_PATH.findall(text)) | set(DOC_NAME.findall(text))
    return {ref for ref in found if not re.match(r"[a-z]+:|/|~|<|\.\.", ref) and "*" not in ref}


def resolves(ref: str, doc: Path) -> bool:
    if ref in ELSEWHERE:
        return True
    if (doc.parent / ref).exists() or (ROOT / ref).exists():
        return True
    return "/" not in ref and any(ROOT.glob(f"[!.]*/**/{ref}"))  # a bare file name: somewhere in the tree


@pytest.mark.parametrize("doc", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_a_doc_names_exists(doc: Path) -> None:
    missing = sorted(ref for ref in references(doc.read_text()) if not resolves(ref, doc))
    assert not missing, f"{doc.relative_to(ROOT)} points at files that are not in the repository: {missing}"


def test_the_readme_lists_every_setting_with_its_default() -> None:
    from verifier_service.settings import SandboxSettings, VerifierSettings

    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Settings") : readme.index("## Training with TRL")]
    for model in (VerifierSettings, SandboxSettings):
        for name, field in model.model_fields.items():
            if name == "sandbox":
                continue
            shown = re.search(rf"`{name.upper()}`\s+\(([^):;]+)", section)
            assert shown, f"the README's Settings do not list {name.upper()}"
            if isinstance(field.default, bool):
                assert shown[1].startswith(str(field.default).lower()), (name, shown[1])
            elif isinstance(field.default, int | float) and shown[1].strip().replace(".", "").isdigit():
                assert float(shown[1]) == field.default, (name, shown[1], field.default)


def project_name() -> str:
    import tomllib

    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"])


def pip_installs_of(name: str, text: str) -> list[str]:
    """The `pip install` commands in `text` that install the package `name` from an index by its name (with or
    without extras), rather than from a path, a URL or a checkout."""
    bare = re.compile(rf"(?<![\w/.@+-])['\"]?{re.escape(name)}(?:\[[\w,\s-]*\])?['\"]?(?![\w/.-])", re.I)
    commands = re.findall(r"pip3? install[^\n`#]*", text)  # up to a comment, the end of the line or of the span
    return [command for command in commands if bare.search(command)]


def test_pip_installs_of_the_unpublished_name_are_found() -> None:
    found = pip_installs_of("reward-verifier", "pip install 'reward-verifier[ray]'\nRUN pip install reward-verifier\n")
    assert found == ["pip install 'reward-verifier[ray]'", "pip install reward-verifier"]
    for fine in ("pip install -e '.[ray]'", "pip install '/src[ray]'", "pip install git+https://h/x/reward-verifier.git",
                 "pip install -e .  # installs reward-verifier's console script"):  # fmt: skip
        assert pip_installs_of("reward-verifier", fine) == [], fine


@pytest.mark.parametrize(
    "path",
    [p for p in subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
     if re.search(r"(\.(md|ya?ml|sh|toml|cfg|txt)|Dockerfile[^/]*|Makefile)$", p)],
)  # fmt: skip
def test_no_file_tells_users_to_pip_install_the_unpublished_name(path: str) -> None:
    """The project is not on PyPI, and its name there is anyone's to take: installing it by name would install
    whatever that is. Docs and build files install it from the repository (a checkout, a copy of the tree) or use
    the image."""
    found = pip_installs_of(project_name(), (ROOT / path).read_text(errors="replace"))
    assert not found, f"{path} tells users to pip install {project_name()} from an index: {found}"


def test_every_compose_variable_is_listed_in_the_env_example() -> None:
    """`.env.example` is the list of what the compose files read (docs/deploy.md points there): a variable missing
    from it is a knob nobody can find."""
    listed = (ROOT / ".env.example").read_text()
    used = {name for path in ROOT.glob("compose*.yaml") for name in re.findall(r"\$\{(\w+)", path.read_text())}
    assert used, "the compose files read variables"
    assert not sorted(name for name in used if not re.search(rf"\b{name}=", listed))


@pytest.mark.parametrize("doc", ["README.md", "docs/deploy.md"])
def test_docs_with_compose_commands_give_the_v1_spelling(doc: str) -> None:
    """Compose v1 (`docker-compose`, as on this project's CI machine) runs the same files; a doc that shows v2's
    `docker compose` commands says how to type them with v1."""
    text = (ROOT / doc).read_text()
    assert "docker compose up" in text
    assert "docker-compose up" in text and "Compose v1" in text


@pytest.mark.parametrize("files", ["compose.yaml", "compose.yaml:compose.scale.yaml"])
def test_the_compose_files_parse_with_compose_v1(files: str) -> None:
    import shutil

    if shutil.which("docker-compose") is None:
        pytest.skip("Compose v1 (docker-compose) is not installed")
    env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "COMPOSE_FILE": files}
    done = subprocess.run(["docker-compose", "config", "-q"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
