"""The code the chapters of Part I share.

A helper that a second chapter of Part I needs is written here once; the
chapter that teaches it shows its source (``mvkm.plotting.show_source``) and
every later chapter imports it. It is not part of the package: anything a user
of ``mvkm`` would call belongs in ``mvkm``.
"""

import numpy as np

__all__: list[str] = []

# --- The objective and the primal model (rkm/objective, rkm/primal) -------------------

__all__ += ["make_views", "rel", "random_spd", "split_views",
            "same_up_to_sign", "fy_gap", "J_init", "J_prd"]


def make_views(n, dims, rank, noise, rng):
    """len(dims) views of n points sharing a rank-dim latent signal.

    View v is R B_v + noise, with R (n x rank) common to all views;
    columns are centred, so the identity feature map gives centred
    features Phi_v.
    """
    R = rng.standard_normal((n, rank))
    views = [R @ rng.standard_normal((rank, d))
             + noise * rng.standard_normal((n, d)) for d in dims]
    return [X - X.mean(axis=0) for X in views]


def rel(A, B):
    """Relative distance ||A - B|| / ||B|| (Frobenius)."""
    return np.linalg.norm(A - B) / np.linalg.norm(B)


def random_spd(s, rng, cond=10.0):
    """A random s x s symmetric positive definite matrix.

    Its eigenvalues are spread geometrically from 1 to cond.
    """
    Q, _ = np.linalg.qr(rng.standard_normal((s, s)))
    return (Q * np.geomspace(1.0, cond, s)) @ Q.T


def split_views(U, dims):
    """Rows of a stacked U (D x s) -> [U_1, ..., U_V], U_v of D_v rows."""
    return np.split(U, np.cumsum(dims)[:-1])


def same_up_to_sign(A, B):
    """rel(A, B) after matching the sign of each column of A to B."""
    signs = np.sign(np.sum(A * B, axis=0))
    return rel(A * signs, B)


def fy_gap(e, h, Gamma, V):
    """Fenchel-Young gap with V views: left minus right side of

    (V/2) e' Gamma^-1 e + (1/(2V)) h' Gamma h >= e' h.
    """
    quad_e = e @ np.linalg.solve(Gamma, e)
    return 0.5 * V * quad_e + 0.5 / V * h @ Gamma @ h - e @ h


def J_init(Us, views, Gamma):
    """The initial multi-view objective, term by term.

    Us: [U_1, ..., U_V]; views: [Phi_1, ..., Phi_V] (rows phi_v(x_{v,i})).
    Scores e_{v,i} = U_v' phi_v(x_{v,i}).
    """
    V, Ginv = len(views), np.linalg.inv(Gamma)
    total = 0.0
    for U_v, P_v in zip(Us, views):
        total += 0.5 * np.sum(U_v * U_v) + 0.5 * np.sum(P_v * P_v)
        for phi in P_v:
            e = U_v.T @ phi
            total -= 0.5 * V * e @ Ginv @ e
    return total


def J_prd(Us, H, views, Gamma):
    """The primal-dual objective, term by term (loops over i and v)."""
    total = 0.5 * sum(np.sum(U_v * U_v) for U_v in Us)
    total += 0.5 * sum(np.sum(P * P) for P in views)
    for i in range(H.shape[0]):
        total += 0.5 * H[i] @ Gamma @ H[i]
        for U_v, P_v in zip(Us, views):
            total -= P_v[i] @ U_v @ H[i]
    return total


# --- The dual model and inference (rkm/dual, rkm/inference) ---------------------------


def align_column_signs(H, H_ref):
    """Flip each column of ``H`` to the sign that best matches ``H_ref``.

    Eigenvectors are defined up to sign; this makes two solutions comparable
    column by column (rkm/dual, rkm/inference).
    """
    signs = np.sign(np.sum(H * H_ref, axis=0))
    return H * signs


__all__ += ["align_column_signs"]


# --- Forecasting experiments (rkm/sines, rkm/santafe) ---------------------------------

__all__ += ["standardise_series", "raw_forecast", "forecast_mse"]


def standardise_series(train):
    """Standardise a training series with its own mean and standard deviation.

    Returns ``(z, m, sd)`` with ``z = (train - m) / sd`` (numpy's ``1/T``
    standard deviation). The test values are never used.
    """
    train = np.asarray(train, dtype=float)
    m, sd = float(train.mean()), float(train.std())
    return (train - m) / sd, m, sd


def raw_forecast(model, z_train, m, sd, n_steps=100):
    """Recursive forecast of a model trained on ``z_train``, in raw units."""
    from mvkm.timeseries import recursive_forecast

    return m + sd * recursive_forecast(model, z_train, n_steps)


def forecast_mse(forecast, test):
    """Mean squared error of a forecast against the test series."""
    diff = np.asarray(forecast, dtype=float) - np.asarray(test, dtype=float)
    return float(np.mean(diff**2))


# --- Parametric maps and the explorer (rkm/parametric, rkm/explorer) ------------------
