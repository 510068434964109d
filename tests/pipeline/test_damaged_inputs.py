"""Damaged inputs a user can leave behind (a hand edit, a merge, a stray byte) are one line naming the
file and what to do, never a traceback."""

from __future__ import annotations

import argparse

import pytest

from rlvr.fields import ConfigError, UserError
from rlvr.io.files import error_line, read_json


def test_json_nested_deeper_than_the_parser_goes_is_one_line(tmp_path):
    path = tmp_path / "report.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(UserError) as caught:
        read_json(path)
    assert str(caught.value).startswith(f"{path}: not a file the pipeline writes (JSON nested too deeply")


def test_a_params_file_that_is_not_utf8_is_one_line(tmp_path):
    from rlvr.io.params import load_params

    path = tmp_path / "params.yaml"
    path.write_bytes(b"seed: 1\n\xff\n")
    with pytest.raises(ConfigError, match=r"params.yaml: not UTF-8 text \(byte 8\); save it as UTF-8"):
        load_params(path)


@pytest.mark.parametrize("text", ["stages: [unclosed", "- a list\n", "\udcff"])
def test_an_unreadable_lock_file_is_one_line(tmp_path, text):
    from rlvr.pipeline.provenance import ProvenanceError, load_lock

    lock = tmp_path / "dvc.lock"
    lock.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(ProvenanceError) as caught:
        load_lock(tmp_path)
    line = error_line(caught.value)
    assert line.startswith(f"{lock}: ") and "git checkout dvc.lock" in line and "\n" not in line


def test_a_damaged_metrics_file_in_a_comparison_is_named(tmp_path):
    from rlvr.report.moves import differing_files

    for side in ("a", "b"):
        (tmp_path / side / "metrics").mkdir(parents=True)
        (tmp_path / side / "passk-counts.json").write_text("{}")
    (tmp_path / "b" / "passk-counts.json").write_text("{bad")
    with pytest.raises(UserError, match=r"b/passk-counts.json: not valid JSON"):
        differing_files(tmp_path / "a", tmp_path / "b")


@pytest.mark.parametrize("text", ["99999", "-1", "0", "http"])
def test_a_port_out_of_range_is_a_usage_error(text):
    from rlvr.cli import port_number

    with pytest.raises(argparse.ArgumentTypeError, match="is not a port number"):
        port_number(text)
    assert port_number("5000") == 5000


def test_rlvr_ui_refuses_a_bad_port_in_one_line(capsys):
    from rlvr.cli import main

    with pytest.raises(SystemExit) as caught:
        main(["ui", "--port", "99999"])
    assert caught.value.code == 2
    assert capsys.readouterr().err.strip().endswith("argument --port: 99999 is not a port number (1-65535)")


def alias_bomb(levels: int = 9) -> str:
    """Nine levels of nine aliases: 9**9 (387 million) values once expanded, 1 KB as text."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_in_params_is_refused_without_expanding_it(tmp_path):
    from rlvr.io.params import read_yaml

    bomb = tmp_path / "params.yaml"
    bomb.write_text("seed: 0\n" + alias_bomb())
    with pytest.raises(
        ConfigError, match=r"params.yaml: its YAML aliases expand to more than 100,000 values"
    ):
        read_yaml(bomb)
    (tmp_path / "loop.yaml").write_text("a: &a [1, *a]\n")  # an alias inside its own anchor
    with pytest.raises(ConfigError):
        read_yaml(tmp_path / "loop.yaml")


def test_an_alias_bomb_in_the_claims_registry_or_a_huge_file_is_one_line(tmp_path):
    from pathlib import Path

    from rlvr.io.files import MAX_TEXT_BYTES
    from rlvr.report.claims import load_claims

    claims = Path(tmp_path / "claims.yaml")
    claims.write_text(alias_bomb())
    with pytest.raises(UserError, match="expand to more than"):
        load_claims(claims)
    claims.write_text("# " + "x" * MAX_TEXT_BYTES + "\n")
    with pytest.raises(UserError, match=r"larger than 4 MiB: not a claims registry"):
        load_claims(claims)
