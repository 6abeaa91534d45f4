"""The project's one compiled part, beside pyproject.toml (which holds everything else): the repetition component's
n-gram count in C (verifier_service/scoring/_ngrams.c). Optional: where no C compiler is, the install goes on without
it and the component counts the same in Python and numpy (verifier_service/scoring/ngrams.py)."""

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
