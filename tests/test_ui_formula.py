"""ui/formula.py: how a calibration formula is broken into the lines the pages typeset."""

from __future__ import annotations


def test_long_formula_lines_are_broken_outside_brackets():
    """Loss perturbation's output-noise clause (103 characters) ran off a 1,400 px page: lines over
    MAX_LINE are broken before a top-level 'with' or after a top-level comma, never inside brackets."""
    from privcore.methods import REGISTRY
    from privcore.types import PrivacyBudget, Problem
    from ui.formula import MAX_LINE, display_latex, formula_lines

    line = "output noise at sensitivity 2g/(lam + rho/N) = 0.000589 with 0.01 of eps and delta (approximate minima perturbation)"
    assert formula_lines(line) == ["output noise at sensitivity 2g/(lam + rho/N) = 0.000589",
                                   "with 0.01 of eps and delta (approximate minima perturbation)"]
    inside = "sigma = f(" + ", ".join(["eps"] * 30) + ")"  # no top-level place to break: kept whole
    assert formula_lines(inside) == [inside]
    problem = Problem(n=4000, dim=784, classes=10, budget=10)
    for delta in (0.0, 1e-5):
        scale = REGISTRY["loss_perturbation"].calibrate(PrivacyBudget(1.0, delta), problem, "corrected")
        assert max(len(x) for x in formula_lines(scale.formula)) <= MAX_LINE
        assert display_latex(scale.formula) is not None


def test_formulas_typeset_or_fall_back_to_text():
    from ui.formula import to_latex

    assert to_latex("sigma = (K/eps) sqrt(8 ln(2/delta) + 4 eps)") == (
        r"\sigma =\left(K /\varepsilon \right)\sqrt{8\ln \left(2/\delta \right)+4\varepsilon }")
    assert to_latex("beta = eps / (2K") is None  # unbalanced: shown as text
    assert to_latex("x {y}") is None


def test_long_formulas_are_stacked_one_statement_a_line():
    """KaTeX does not wrap: the sparse-vector and loss-perturbation formulas (240+ characters on one
    line) ran off the right edge of Calibrate and Explore. Each statement gets its own line."""
    from privcore import REGISTRY, PrivacyBudget, Problem, calibrate
    from ui.formula import display_latex, formula_lines

    problem = Problem(n=4000, dim=784, classes=10, lam=1e-3, budget=10, teachers=16)
    for m in REGISTRY:
        text = calibrate(m, PrivacyBudget(3.0, 1e-5), problem, "corrected").formula
        lines = formula_lines(text)
        assert all(len(line) <= 120 for line in lines), (m, lines)
        assert display_latex(text) is not None, m  # every line typesets
        assert sum(map(len, lines)) <= len(text) and all(line in text for line in lines), (m, lines)  # only split
    sv = formula_lines("c = ceil(B/4) = 3; stable if d >= w, w = (2c/eps_2) ln(2B/delta); beta = max(eps/(4c), 1)")
    assert sv == ["c = ceil(B/4) = 3", "stable if d >= w", "w = (2c/eps_2) ln(2B/delta)", "beta = max(eps/(4c), 1)"]
    assert display_latex("a = 1; b = (2") is None  # one unreadable line: the plain text for all
    assert display_latex("a = 1; b = 2").startswith(r"\begin{gathered}")


def test_a_word_after_a_number_keeps_its_space():
    from ui.formula import to_latex

    latex = to_latex("P = 500 GNMax labels, whatever B")
    assert "500\\text" not in latex and "500\\ \\text{GNMax labels}" in latex


def test_e_notation_is_typeset_as_a_power_of_ten():
    """Calibrate showed '= 2.8e − 07' (KaTeX reads e-07 as e minus 07)."""
    from ui.formula import to_latex

    assert to_latex("g = 2.8e-07") == r"g =2.8 \times 10^{-7}"
    assert to_latex("x = 1e-5") == "x =10^{-5}"
    assert to_latex("s = 3.5e+07") == r"s =3.5 \times 10^{7}"


def test_a_narrow_width_wraps_more_and_only_inside_its_block():
    from ui.formula import MAX_LINE, formula_lines, line_width

    text = ("threshold = 0.3 k, sigma_1 = 2 sigma_2; B = 10 Poisson(gamma = 0.1)-subsampled Gaussian queries "
            "(replace-one, dp_accounting PLD (moderate grid)): z = 2.417; sigma_2 = z sqrt(2 + 1/r^2)")
    wide = formula_lines(text)
    with line_width(56):
        narrow = formula_lines(text)
    assert all(len(line) <= 56 for line in narrow) and len(narrow) > len(wide), narrow
    assert all(len(line) <= MAX_LINE for line in wide) and formula_lines(text) == wide  # width restored


def test_the_formulas_expander_wraps_model_sensitivity_for_a_narrow_page():
    """At 800 px Calibrate's model-sensitivity formula was cut after "2g/.": its text now breaks at a top-level
    " with ", and the formulas expander typesets lines of at most FORMULA_LINE characters."""
    from privcore.calibration import calibrate
    from privcore.types import PrivacyBudget, Problem
    from ui.display import FORMULA_LINE
    from ui.formula import formula_lines, line_width

    formula = calibrate("model_sensitivity", PrivacyBudget(3.0, 1e-5), Problem(), "corrected").formula
    with line_width(FORMULA_LINE):
        lines = formula_lines(formula)
    assert len(lines) >= 2 and max(len(line) for line in lines) <= FORMULA_LINE + 4, lines


def test_subsample_and_aggregates_formula_breaks_into_two_lines():
    """Its 76-character line could not break (all inside max(...)) and ran past an 800 px page: the zCDP
    branch is named beta_z and defined on a line of its own."""
    from privcore.calibration import calibrate
    from privcore.types import PrivacyBudget, Problem
    from ui.display import FORMULA_LINE
    from ui.formula import display_latex, formula_lines, line_width

    formula = calibrate("subsample_aggregate", PrivacyBudget(3.0, 1e-5), Problem(), "corrected").formula
    with line_width(FORMULA_LINE):
        lines = formula_lines(formula)
        latex = display_latex(formula)
    assert lines[0] == "beta = max(eps/(2B), beta_z)" and lines[1].startswith("with beta_z = sqrt(2/B)")
    assert latex is not None and r"\beta_{z}" in latex


def test_a_clause_of_words_breaks_between_words_and_never_inside_the_mathematics():
    """S&A's tight rule kept a 68-character line of words in the 52-character formulas expander: it now
    breaks between two words of text, while a line of mathematics (beta_z's) stays whole."""
    from privcore.calibration import calibrate
    from privcore.types import PrivacyBudget, Problem
    from ui.display import FORMULA_LINE
    from ui.formula import formula_lines, line_width, to_latex

    tight = calibrate("subsample_aggregate", PrivacyBudget(3.0, 1e-5), Problem(), "tight").formula
    with line_width(FORMULA_LINE):
        lines = formula_lines(tight)
        beta_z = formula_lines("with beta_z = sqrt(2/B)(sqrt(ln(1/delta) + eps) - sqrt(ln(1/delta)))")
    assert max(len(line) for line in lines) <= FORMULA_LINE, lines
    assert " ".join(lines) == " ".join(tight.split()) and all(to_latex(line) is not None for line in lines)
    assert beta_z == ["with beta_z = sqrt(2/B)(sqrt(ln(1/delta) + eps) - sqrt(ln(1/delta)))"]
