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
    # a bad-input hunt: the parser offered "'inf' for the non-private baseline", then DeepSpec refused inf
    (["--epsilons", "1,inf"], "argument --epsilons: must be a finite number > 0 (the non-private reference is run"),
    (["--epsilons", "nan"], "argument --epsilons: must be a finite number, got 'nan'"),
    (["--epsilons", "0"], "epsilon must be a finite number > 0, got 0.0"),  # it said "in (0, inf]"
])
def test_bad_sizes_exit_2_in_one_line(no_training, capsys, argv, fragment):
    assert main(["deep", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert fragment in err and "\n" not in err and "_size" not in err and "non-private baseline" not in err


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


def test_figure7_refuses_an_empty_path_deep_missing_folders_and_foreign_files(no_training, tmp_path, capsys):
    """A bad-input hunt: `--figure7 ''` wrote into the current folder, `--figure7 /nonexistent/x/y` created
    three folders, and a file of the same name holding someone's notes was replaced without a word."""
    from privcore.deep.spec import DeepRow

    for target, fragment in (("", "--figure7 must name a folder, got ''"),
                             (str(tmp_path / "no" / "such" / "figs"), "its parent folder does not exist")):
        assert main(["deep", "--figure7", target]) == 2
        assert fragment in capsys.readouterr().err
    assert not (tmp_path / "no").exists()
    figs = tmp_path / "figs"
    figs.mkdir()
    notes = figs / "fig7a_fashion-mnist_small-cnn.csv"
    notes.write_text("my precious notes\n")
    assert main(["deep", "--figure7", str(figs)]) == 2
    assert "is not a privcore Figure 7 file: it is kept" in capsys.readouterr().err
    assert notes.read_text() == "my precious notes\n"
    notes.write_text(",".join(DeepRow.columns()) + "\n")  # an earlier run's file: replaced by the next one
    with pytest.raises(AssertionError, match="training started"):  # the checks passed, so the run went on
        main(["deep", "--figure7", str(figs)])
