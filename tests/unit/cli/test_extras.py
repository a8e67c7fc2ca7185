"""Optional dependencies: a command whose extra is missing names the extra to install."""

from __future__ import annotations

import pytest

from rocketrio.cli import extras


def test_an_installed_extra_needs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(extras.EXTRAS, "fake", ("json", "email.message"))
    assert extras.missing_extra("fake", "rocketrio x") is None


def test_a_missing_extra_names_its_modules_and_the_pip_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(extras.EXTRAS, "fake", ("json", "no_such_mod_i31", "no_such_pkg_i31.sub"))
    line = extras.missing_extra("fake", "rocketrio x")
    assert line is not None
    assert line.startswith("rocketrio x: needs no_such_mod_i31, no_such_pkg_i31.sub,")
    assert "pip install 'rocketrio[fake]'" in line


def test_the_extras_match_the_packaging() -> None:
    import tomllib

    from tests.harness.paths import REPO

    optional = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(extras.EXTRAS) <= set(optional)
    assert "pyspark" in optional["analysis"][0] and "grpcio" in optional["proxy"][0]
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not any(d.startswith(("pyspark", "grpcio", "protobuf")) for d in deps)
