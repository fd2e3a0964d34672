"""A plain, non-private reference for a user's data: scikit-learn's logistic regression.

The dashboard compares its own non-private model (after the declared, data-independent
preprocessing and the unit-ball map) with this reference on the same train/test split; a large
gap says the preprocessing hurts (features on very different scales, no intercept) rather than
that the data set is hard. The reference standardises with the training split's own mean and
standard deviation: fine for a number only the data owner sees, never for a private release.
"""

from __future__ import annotations

import numpy as np

from .transforms import seeded_split

__all__ = ["plain_logistic_accuracy", "baseline_gap_warning", "GAP_WARNING"]

#: Gap in test accuracy above which the dashboard warns.
GAP_WARNING = 0.1


def plain_logistic_accuracy(data_file: str, *, label_column: str | None = None, seed: int = 0,
                            test_fraction: float = 0.2) -> float:
    """Test accuracy of scikit-learn's standardised, unregularised-ish logistic regression (C = 100)
    on the same seeded split :func:`privcore.data.load_dataset` uses for ``name="file"``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from .userfile import load_user_file

    src = load_user_file(data_file, label_column)
    tr, te = seeded_split(src.y.shape[0], test_fraction, seed)
    model = make_pipeline(StandardScaler(), LogisticRegression(C=100.0, max_iter=2000))
    model.fit(np.asarray(src.x[tr], dtype=np.float64), src.y[tr])
    return float(model.score(np.asarray(src.x[te], dtype=np.float64), src.y[te]))


def baseline_gap_warning(ours: float, plain: float, *, threshold: float = GAP_WARNING) -> str | None:
    """A plain-words warning when the app's non-private accuracy ``ours`` is more than ``threshold``
    below the plain logistic regression's ``plain``; None otherwise."""
    if not (plain - ours > threshold):
        return None
    return (f"The non-private model reaches {ours:.2f} here, but a plain (non-private) logistic regression on the same "
            f"split reaches {plain:.2f}. The features probably need scaling or an intercept: declare public bounds "
            "for standardisation (or a row norm) and add the intercept feature under 'Preprocessing' in the sidebar. "
            "Every private method inherits this gap.")
