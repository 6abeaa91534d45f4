"""The project's one compiled part, beside pyproject.toml (which holds everything else): the n-gram count of ASCII
texts in C (verifier_service/scoring/_ngrams.c). Optional: where no C compiler is, the install goes on without it and
the repetition component counts the same in Python and numpy (verifier_service/scoring/ngrams.py)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "verifier_service.scoring._ngrams",
            ["verifier_service/scoring/_ngrams.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
