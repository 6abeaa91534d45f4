"""The project's compiled parts, beside pyproject.toml (which holds everything else): the repetition component's
n-gram count and loop check in C (verifier_service/scoring/_repetition.c), and the steps component's claim reader
(scoring/_arithmetic.c). Optional: where no C compiler is, the install goes on without them and the components do the
same in Python and numpy (scoring/ngrams.py, repetition.py, arithmetic.py)."""

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
    ]
)
