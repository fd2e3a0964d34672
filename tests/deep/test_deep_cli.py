"""privcore.deep.cli: bad sizes and output folders are refused before any training starts."""

from __future__ import annotations

import pytest

from privcore.cli import main
from privcore.deep import run as deep_run


@pytest.fixture
def no_training(monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("training started although the request was invalid")

    monkeypatch.setattr(deep_run, "run_deep", refuse)


@pytest.mark.parametrize("argv, fragment", [
    (["--n-train", "-1"], "n_train must be an integer in [10,"),   # once: -1 was the stand-in for 'all'
    (["--n-test", "-1"], "n_test must be an integer in [10,"),
    (["--n-train", "abc"], "argument --n-train: must be a whole number or 'all', got 'abc'"),  # once: "invalid _size value"
])
def test_bad_sizes_exit_2_in_one_line(no_training, capsys, argv, fragment):
    assert main(["deep", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert fragment in err and "\n" not in err and "_size" not in err


def test_figure7_into_a_file_or_an_uncreatable_folder_is_refused_before_training(no_training, tmp_path, capsys):
    afile = tmp_path / "taken.csv"
    afile.write_text("x\n")
    for target, fragment in ((afile, "--figure7 must be a folder, got the file 'taken.csv'"),
                             (afile / "sub", "--figure7 folder 'sub' cannot be created")):
        assert main(["deep", "--figure7", str(target)]) == 2
        err = capsys.readouterr().err.strip()
        assert fragment in err and str(tmp_path) not in err
    assert main(["deep", "--figure7", str(tmp_path / "figs"), "--format", "json"]) == 2
    assert "--figure7 writes CSV files" in capsys.readouterr().err
    assert main(["deep", "--figure7", str(tmp_path / "figs2"), "--epsilons", "1"]) == 2
    assert "leave out --epsilons" in capsys.readouterr().err
    # a refused run leaves nothing behind (a bad-input hunt found the folders created)
    assert not (tmp_path / "figs").exists() and not (tmp_path / "figs2").exists()
