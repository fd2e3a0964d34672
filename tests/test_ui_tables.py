"""ui/tables.py: the noise tables' short headers, column order and pinned method, short noise names."""

from __future__ import annotations


def test_noise_tables_show_short_headers_with_help():
    from ui.tables import NOISE_TABLE_HEADERS, noise_table, noise_table_config

    table = noise_table([{"method": "model_sensitivity", "noise": "laplace_like", "beta": 2.0, "accuracy_mean": 0.5,
                          "accuracy_std": 0.01, "sensitivity": 0.1}])
    config = noise_table_config(table.columns)
    assert set(config) == (set(NOISE_TABLE_HEADERS) & set(table.columns)) | {"Method"} and len(config) >= 9
    assert all(len(NOISE_TABLE_HEADERS[c][0]) <= 11 for c in config if c != "Method")  # 13 columns fit 1,400 px


def test_noise_tables_read_method_and_accuracy_first_on_a_narrow_screen():
    """At 800 px the table scrolls sideways: the method is pinned, accuracy and the answered share come
    next; formulas and notes are typeset below."""
    from ui.tables import noise_table, noise_table_config, noise_table_order

    table = noise_table([{"method": "confident_gnmax", "noise": "gaussian", "sigma": 2.0, "accuracy_mean": 0.5,
                          "accuracy_std": 0.01, "answered_fraction": 0.5, "formula": "f", "note": "n"}])
    order = noise_table_order(table.columns)
    assert order[:3] == ["Method", "Accuracy", "Answered"] and order[3] == "Noise"
    assert "Formula" not in order and "Note" not in order and len(order) == len(table.columns) - 2
    config = noise_table_config(table.columns)
    assert config["Method"]["pinned"] is True
    assert noise_table_order(["Method", "Noise", "Sensitivity", "Formula", "Notes"]) == ["Method", "Noise", "Sensitivity"]
    from privcore.types import NOISE_KINDS
    from ui.tables import NOISE_NAMES, noise_name

    assert set(NOISE_NAMES) == set(NOISE_KINDS) and max(len(noise_name(k)) for k in NOISE_KINDS) <= 14
    assert list(table["Noise"]) == ["Gaussian"]
