"""The project's compiled parts, beside pyproject.toml (which holds everything else), each optional: where no C
compiler is, the install goes on without them and the components do the same in Python, with the same results.

- The repetition component's n-gram count and loop check (verifier_service/scoring/_repetition.c; without it,
  Python and numpy: scoring/ngrams.py, repetition.py).
- The steps component's claim reader (scoring/_arithmetic.c; without it, arithmetic.py's reader).
- langdetect's detection for the instructions component's language checks (scoring/instructions/_langdetect.c;
  without it, langdetect's own Python: scoring/instructions/detect.py)."""

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
            "verifier_service.scoring._arithmetic",
            ["verifier_service/scoring/_arithmetic.c"],
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
