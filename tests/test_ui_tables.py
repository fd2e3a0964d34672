"""ui/tables.py: the noise tables' short headers, column order and pinned method, short noise names."""

from __future__ import annotations


def test_noise_tables_show_short_headers_with_help():
    from ui.tables import noise_table_headers, noise_table, noise_table_config

    table = noise_table([{"method": "model_sensitivity", "noise": "laplace_like", "beta": 2.0, "accuracy_mean": 0.5,
                          "accuracy_std": 0.01, "sensitivity": 0.1}])
    config = noise_table_config(table.columns)
    assert set(config) == (set(noise_table_headers()) & set(table.columns)) | {"Method"} and len(config) >= 9
    assert all(len(noise_table_headers()[c][0]) <= 11 for c in config if c != "Method")  # 13 columns fit 1,400 px


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


def test_noise_table_cells_are_short_values():
    """PATE's data-dependent ε and what publishing it costs are two short cells: in one cell,
    "2.17 (8.55 to publish)" was cut to "2.17 (8.55 to" at 800 and 1,400 px. Every shown cell but the
    method and the accuracy fits about twelve characters; the explanations are hover help."""
    from ui.tables import noise_table_headers, noise_table, noise_table_config, noise_table_order

    rows = [{"method": "confident_gnmax", "noise": "gaussian", "sigma": 6.8, "threshold": 12.8, "accuracy_mean": 0.358,
             "accuracy_std": 0.041, "answered_fraction": 0.543, "epsilon_data_dependent": 2.17,
             "epsilon_dd_published": 8.55, "sensitivity": 1.414},
            {"method": "sparse_vector", "noise": "exponential_mechanism", "beta": 0.25, "accuracy_mean": 0.2,
             "accuracy_std": 0.01, "per_query_epsilon": 0.5, "answered_fraction": 0.301, "sensitivity": 1.0},
            {"method": "model_sensitivity", "noise": "laplace_like", "beta": 1.2345e-4, "accuracy_mean": 0.3,
             "accuracy_std": 0.1, "sensitivity": 1.987}]
    table = noise_table(rows)
    gnmax = table[table["Method"].str.contains("Confident")].iloc[0]
    assert gnmax["ε data-dependent (not a guarantee)"] == "2.17" and gnmax["ε to publish the data-dependent ε"] == "8.55"
    shown = [c for c in noise_table_order(table.columns) if c not in ("Method", "Accuracy")]
    assert max(len(str(v)) for c in shown for v in table[c]) <= 12, table[shown].to_dict("records")
    config = noise_table_config(table.columns)
    assert config["ε to publish the data-dependent ε"]["label"] == "ε publ." and "publishing" in \
        config["ε to publish the data-dependent ε"]["help"]
    assert all(config[c].get("help") for c in shown if c in noise_table_headers())


def test_the_legend_explains_every_short_header_shown():
    """Explore's hand-written legend said nothing of 'Thresh.' and 'Δ'; Calibrate had none."""
    from ui.tables import noise_table_headers, noise_table_legend

    columns = ["Method", "Accuracy", "Answered", "Noise", "σ (Gaussian std)", "Threshold", "Sensitivity Δ", "Formula"]
    legend = noise_table_legend(columns)
    for c in ("σ (Gaussian std)", "Threshold", "Sensitivity Δ", "Answered"):
        short, text = noise_table_headers()[c]
        assert f"{short}: {text}" in legend
    assert "Formula" not in legend and legend.endswith("-: does not apply")
    assert noise_table_legend(["Method"]) == ""
    on = noise_table_legend(columns, answered_only=True)
    assert "answered queries only" in on and "abstentions count as wrong" not in on  # follows the toggle


def test_columns_that_say_nothing_for_the_methods_shown_are_left_out():
    """At 1280 px Explore's table scrolled sideways to show columns that were "-" for every method shown (ρ,
    z with no loss perturbation or DP-SGD): given the frame, the order leaves them out, and the legend below
    explains only what is shown."""
    from ui.tables import noise_table, noise_table_legend, noise_table_order

    table = noise_table([
        {"method": "model_sensitivity", "noise": "gaussian", "sigma": 0.5, "accuracy_mean": 0.7, "accuracy_std": 0.01,
         "sensitivity": 0.1},
        {"method": "subsample_aggregate", "noise": "exponential_mechanism", "beta": 0.2, "per_query_epsilon": 0.3,
         "accuracy_mean": 0.5, "accuracy_std": 0.01},
        {"method": "non_private", "noise": "none", "accuracy_mean": 0.9, "accuracy_std": 0.0}])
    order = noise_table_order(table.columns, table)
    assert {"σ (Gaussian std)", "β (inverse scale)", "Per-query ε", "Sensitivity Δ"} <= set(order)
    assert "ρ (extra L2)" not in order and "Noise multiplier" not in order
    assert "ρ (extra L2)" in noise_table_order(table.columns)  # without the frame: every column, as before
    legend = noise_table_legend(order)
    assert "σ:" in legend and "ρ:" not in legend and "z:" not in legend


def test_the_real_epsilon_column_comes_right_after_the_accuracy():
    """The warning above the table points to the "Real ε" column, which sat last, off-screen at 1280 px."""
    from ui.tables import noise_table, noise_table_order

    table = noise_table([{"method": "dpsgd", "noise": "gaussian", "sigma": 1.0, "noise_multiplier": 2.0,
                          "accuracy_mean": 0.8, "accuracy_std": 0.01, "real_epsilon": 4.09}])
    order = noise_table_order(table.columns, table)
    assert order[:3] == ["Method", "Accuracy", "Real ε (replace-one)"], order
