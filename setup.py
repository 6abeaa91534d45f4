"""The project's compiled parts, beside pyproject.toml (which holds everything else): the repetition component's
n-gram count and loop check in C (verifier_service/scoring/_repetition.c). Optional: where no C compiler is, the
install goes on without it and the component does the same in Python and numpy (scoring/ngrams.py, repetition.py).
And langdetect's detection for the instructions component's language checks (scoring/instructions/_langdetect.c),
likewise optional: without it, langdetect's own Python gives the same languages (scoring/instructions/detect.py)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "verifier_service.scoring._repetition",
            ["verifier_service/scoring/_repetition.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "verifier_service.scoring.instructions._langdetect",
            ["verifier_service/scoring/instructions/_langdetect.c"],
            extra_compile_args=["-O2", "-ffp-contract=off"],  # no fused multiply-add: langdetect's doubles exactly
            libraries=["m"],
            optional=True,
        ),
    ]
)
