"""The wheel's package list, beside pyproject.toml (which holds everything else).

Only here because pyproject.toml cannot name a package that lives in another folder: the bundled
profiles stay in the top-level profiles/ folder and travel in the wheel as the package data of
``engine.bundled_profiles``, so that a core install (`pip install .`) has `local`, `4x_rtx4080` ...
as a source checkout does (engine/profiles.py looks there first).
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["engine*", "tui*"]), "engine.bundled_profiles"],
    package_dir={"engine.bundled_profiles": "profiles"},
)
