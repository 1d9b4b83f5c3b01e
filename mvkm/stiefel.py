r"""Optimisation on the Stiefel manifold: Cayley retractions, Cayley ADAM, trace maximisation.

The Stiefel manifold :math:`\mathrm{St}(n, s) = \{A \in \mathbb{R}^{n \times s} :
A^\top A = I_s\}` (orthonormal **columns**, :math:`s \le n`) is the feasible set of
the primal and dual problems of the multi-view RKM (Problems (8) and (12) of
:cite:`achten2023duality`); both amount to maximising :math:`\mathrm{Tr}(A^\top B A)`
for a symmetric :math:`B` (a covariance :math:`C` or a centred kernel :math:`K`).
By Proposition 3.3 there (stated for positive definite :math:`B`, true for any
symmetric one), when :math:`\lambda_s > \lambda_{s+1}` the maximisers are exactly
the orthonormal bases of the top-:math:`s` eigenspace of :math:`B`; the optimum
value is the sum of the :math:`s` largest eigenvalues in every case.

This module holds

* the geometry: :func:`random_stiefel`, :func:`stiefel_project`,
  :func:`riemannian_gradient`, :func:`cayley_retraction`,
  :func:`orthonormality_error`;
* :class:`CayleyAdam`, the Cayley ADAM optimiser of Li, Li and Todorovic
  (ICLR 2020, Algorithm 2) as a :class:`torch.optim.Optimizer`, for stochastic
  losses and for networks that mix Stiefel and Euclidean parameters;
* :func:`maximize_trace`, the trace-maximisation core, with the fast full-batch
  Cayley/Barzilai-Borwein method of Wen and Yin (2013) (default) or Cayley ADAM.

Shapes: ``A`` is ``(n, s)``, ``B`` is ``(n, n)``; numpy float64 in and out
(torch only inside :class:`CayleyAdam` and the ``device=`` paths).
"""

from __future__ import annotations

import math
import warnings
from numbers import Integral, Real
from typing import Any, Callable, Iterable

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from scipy.sparse.linalg import LinearOperator

from ._optional import require_torch
from ._validation import (
    check_array,
    check_count,
    check_n_components,
    check_positive,
    check_random_state,
    check_sparse_symmetric,
    check_symmetric,
)
from ._validation import check_bool, check_torch_device
from .linalg import psd_sqrt, rotate_to_diagonal
from .linalg import ConvergenceWarning

torch = require_torch("the Stiefel-manifold solvers (mvkm.stiefel)")

__all__ = [
    "CayleyAdam",
    "maximize_trace",
    "cayley_retraction",
    "random_stiefel",
    "stiefel_project",
    "riemannian_gradient",
    "orthonormality_error",
]

#: Largest ``max |A^T A - I|`` accepted for a user-supplied point of St(n, s).
_STIEFEL_INPUT_TOL = 1e-6

_METHODS = ("cayley-bb", "cayley-adam")
_DEFAULT_MAX_ITER = {"cayley-bb": 1000, "cayley-adam": 20000}
_DEFAULT_ADAM_LR = 1.0


# ---------------------------------------------------------------------------
# Geometry helpers
# ---------------------------------------------------------------------------


def orthonormality_error(A: ArrayLike) -> float:
    r"""Distance of ``A`` from the Stiefel manifold: :math:`\max_{ij} |(A^\top A - I_s)_{ij}|`.

    Parameters
    ----------
    A : array_like of shape (n, s)

    Returns
    -------
    float
        Zero (up to round-off, about ``1e-15``) exactly when ``A`` has orthonormal columns.
    """
    A = check_array(A, "A")
    return float(np.max(np.abs(A.T @ A - np.eye(A.shape[1]))))


def _check_stiefel(A: Any, name: str, shape: tuple[int, int] | None = None,
                   tol: float = _STIEFEL_INPUT_TOL) -> NDArray[np.float64]:
    """Validate a point of St(n, s): 2-D, finite, n >= s, orthonormal columns."""
    A = check_array(A, name)
    if shape is not None and A.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {A.shape}")
    n, s = A.shape
    if s > n:
        raise ValueError(
            f"{name} must have at least as many rows as columns (a point of St(n, s) "
            f"has s <= n orthonormal columns), got shape {A.shape}"
        )
    err = orthonormality_error(A)
    if err > tol:
        raise ValueError(
            f"{name} must have orthonormal columns ({name}^T {name} = I); "
            f"max |{name}^T {name} - I| = {err:.3g} exceeds {tol:g}. "
            "Use mvkm.stiefel.random_stiefel or the Q factor of numpy.linalg.qr."
        )
    return A


def _polar_np(A: NDArray[np.float64]) -> NDArray[np.float64]:
    """Nearest matrix with orthonormal columns, A (A^T A)^{-1/2}."""
    return A @ psd_sqrt(A.T @ A, inverse=True)


def random_stiefel(n: int, s: int, random_state: Any = None) -> NDArray[np.float64]:
    r"""A random point of :math:`\mathrm{St}(n, s)`, uniformly (Haar) distributed.

    Draws :math:`Z \in \mathbb{R}^{n \times s}` with i.i.d. standard normal
    entries, computes the thin QR factorisation :math:`Z = QR` and returns
    :math:`Q\,\mathrm{diag}(\mathrm{sign}(r_{11}), \dots, \mathrm{sign}(r_{ss}))`;
    the sign fix makes the factorisation unique, hence the law of the result
    invariant under :math:`A \mapsto OA` for every orthogonal :math:`O`.

    Parameters
    ----------
    n : int
        Number of rows, ``n >= 1``.
    s : int
        Number of orthonormal columns, ``1 <= s <= n``.
    random_state : None, int or numpy.random.Generator
        Seed or generator.

    Returns
    -------
    A : ndarray of shape (n, s)
        ``A.T @ A == I`` up to round-off.
    """
    n = check_count(n, "n")
    s = check_n_components(s, int(n), "s", what="the number of rows n")
    rng = check_random_state(random_state)
    Q, R = np.linalg.qr(rng.standard_normal((int(n), s)))
    signs = np.sign(np.diag(R))
    signs[signs == 0] = 1.0
    return Q * signs


def stiefel_project(A: ArrayLike, Z: ArrayLike) -> NDArray[np.float64]:
    r"""Orthogonal projection of ``Z`` onto the tangent space of :math:`\mathrm{St}(n, s)` at ``A``.

    The tangent space is :math:`T_A = \{\xi : A^\top \xi + \xi^\top A = 0\}`;
    with the Euclidean inner product :math:`\langle X, Y\rangle = \mathrm{Tr}(X^\top Y)`
    the projection is

    .. math:: P_A(Z) = Z - A\,\mathrm{sym}(A^\top Z), \qquad
              \mathrm{sym}(M) = \tfrac12 (M + M^\top).

    Parameters
    ----------
    A : array_like of shape (n, s)
        Orthonormal columns (assumed, not checked).
    Z : array_like of shape (n, s)

    Returns
    -------
    xi : ndarray of shape (n, s)
        Satisfies ``A.T @ xi + xi.T @ A == 0`` up to round-off.
    """
    A = check_array(A, "A")
    Z = check_array(Z, "Z")
    if Z.shape != A.shape:
        raise ValueError(f"Z must have the shape of A, {A.shape}, got {Z.shape}")
    AtZ = A.T @ Z
    return Z - A @ (0.5 * (AtZ + AtZ.T))


def riemannian_gradient(A: ArrayLike, G: ArrayLike) -> NDArray[np.float64]:
    r"""Riemannian gradient on :math:`\mathrm{St}(n, s)` from a Euclidean gradient ``G``.

    For the metric inherited from :math:`\mathbb{R}^{n \times s}` the Riemannian
    gradient of a function is the tangent projection of its Euclidean gradient,
    :math:`\operatorname{grad} f(A) = G - A\,\mathrm{sym}(A^\top G)` (see
    :func:`stiefel_project`). For the trace objective
    :math:`f(A) = \tfrac12 \mathrm{Tr}(A^\top B A)` one has :math:`G = BA`,
    :math:`A^\top G = A^\top B A` is symmetric and

    .. math:: \operatorname{grad} f(A) = (I_n - A A^\top) B A = BA - A\Gamma,
              \qquad \Gamma = A^\top B A,

    which vanishes exactly when :math:`\mathrm{range}(A)` is an invariant
    subspace of :math:`B` (the first-order condition of Proposition 3.3 of
    :cite:`achten2023duality`).

    Parameters
    ----------
    A : array_like of shape (n, s)
        Orthonormal columns (assumed, not checked).
    G : array_like of shape (n, s)
        Euclidean gradient at ``A``.

    Returns
    -------
    ndarray of shape (n, s)
    """
    try:
        return stiefel_project(A, G)
    except ValueError as exc:
        raise ValueError(str(exc).replace("Z must", "G must")) from None


def cayley_retraction(A: ArrayLike, W: ArrayLike | tuple[ArrayLike, ArrayLike],
                      tau: float) -> NDArray[np.float64]:
    r"""Cayley transform: move ``A`` along the curve generated by a skew-symmetric ``W``.

    .. math:: Y(\tau) = \Bigl(I_n - \tfrac{\tau}{2} W\Bigr)^{-1}
                        \Bigl(I_n + \tfrac{\tau}{2} W\Bigr) A,
              \qquad W^\top = -W.

    Because :math:`(I - \frac\tau2 W)^{-1}(I + \frac\tau2 W)` is orthogonal for
    skew :math:`W`, :math:`Y(\tau)^\top Y(\tau) = A^\top A = I_s` for every
    :math:`\tau`; the curve starts at :math:`Y(0) = A` with velocity
    :math:`Y'(0) = WA`. To follow a tangent vector :math:`\xi` at :math:`A`
    use :math:`W = P\xi A^\top - A (P\xi)^\top` with :math:`P = I - \frac12 AA^\top`
    (then :math:`WA = \xi`).

    Parameters
    ----------
    A : array_like of shape (n, s)
        Orthonormal columns.
    W : array_like of shape (n, n), or a pair ``(U, V)`` of arrays of shape (n, k)
        The skew-symmetric generator, either dense (solved in :math:`O(n^3)`)
        or in low-rank form :math:`W = U V^\top` (skew-symmetry of
        :math:`UV^\top` is checked). The low-rank form uses the
        Sherman-Morrison-Woodbury identity,

        .. math:: Y(\tau) = A + \tau\, U \Bigl(I_k - \tfrac{\tau}{2} V^\top U\Bigr)^{-1} V^\top A,

        which costs :math:`O(n k s + k^3)` (as in :cite:`wen2013feasible`;
        typically :math:`k = 2s`, e.g. :math:`U = [P\xi, A]`,
        :math:`V = [A, -P\xi]`).
    tau : float
        Step length (any real number; negative moves backwards).

    Returns
    -------
    Y : ndarray of shape (n, s)
        Orthonormal columns, up to round-off.
    """
    A = _check_stiefel(A, "A")
    n = A.shape[0]
    if isinstance(tau, bool) or not isinstance(tau, Real) or not np.isfinite(tau):
        raise TypeError(f"tau must be a finite real number, got {tau!r}")
    tau = float(tau)
    if isinstance(W, tuple):
        if len(W) != 2:
            raise ValueError(f"W given as a tuple must be a pair (U, V), got {len(W)} items")
        U = check_array(W[0], "U")
        V = check_array(W[1], "V")
        if U.shape != V.shape or U.shape[0] != n:
            raise ValueError(
                f"U and V must both have shape (n, k) with n = {n}, got {U.shape} and {V.shape}"
            )
        # ||U V^T + V U^T||_F^2 = 2 Tr(U^T U V^T V) + 2 Tr((V^T U)^2), in O(n k^2).
        VtU = V.T @ U
        sym2 = 2.0 * np.sum((U.T @ U) * (V.T @ V)) + 2.0 * np.sum(VtU * VtU.T)
        scale = np.linalg.norm(U) * np.linalg.norm(V)
        if np.sqrt(max(sym2, 0.0)) > 1e-8 * max(scale, np.finfo(float).tiny):
            raise ValueError("W = U V^T must be skew-symmetric (U V^T = -V U^T)")
        k = U.shape[1]
        return A + tau * U @ np.linalg.solve(np.eye(k) - 0.5 * tau * VtU, V.T @ A)
    Wd = check_array(W, "W")
    if Wd.shape != (n, n):
        raise ValueError(f"W must have shape ({n}, {n}), got {Wd.shape}")
    if np.max(np.abs(Wd + Wd.T)) > 1e-8 * max(np.max(np.abs(Wd)), np.finfo(float).tiny):
        raise ValueError("W must be skew-symmetric (W^T = -W)")
    eye = np.eye(n)
    return np.linalg.solve(eye - 0.5 * tau * Wd, (eye + 0.5 * tau * Wd) @ A)


# ---------------------------------------------------------------------------
# Cayley ADAM
# ---------------------------------------------------------------------------


class CayleyAdam(torch.optim.Optimizer):
    r"""Cayley ADAM: Adam on the Stiefel manifold (Li, Li and Todorovic, ICLR 2020).

    Minimises a (possibly stochastic, mini-batch) loss over parameters with
    orthonormal **columns**, :math:`X \in \mathrm{St}(n, s)`, ``X.shape == (n, s)``,
    :math:`X^\top X = I_s`, following Algorithm 2 of :cite:`li2020cayley`
    (momentum in the tangent space, a scalar adaptive second moment, the
    iterative Cayley transform and the projection of the momentum). Parameter
    groups with ``stiefel=False`` get plain Adam (:cite:`kingma2015adam`,
    identical to :class:`torch.optim.Adam`), so one optimiser can train a
    network's weights together with a Stiefel matrix.

    **Stiefel update.** At step :math:`k = 1, 2, \dots` with Euclidean gradient
    :math:`G_k = \nabla \ell(X_k)` (``p.grad``), :math:`M_0 = 0` and
    :math:`v_0 = 0` (as in Adam, so that the bias corrections are exact):

    .. math::

        M_k &= \beta_1 M_{k-1} + (1 - \beta_1) G_k, \qquad
        v_k = \beta_2 v_{k-1} + (1 - \beta_2) \|G_k\|_F^2, \\
        \hat v_k &= v_k / (1 - \beta_2^k), \qquad
        r_k = (1 - \beta_1^k) \sqrt{\hat v_k + \epsilon}, \\
        \hat W_k &= M_k X_k^\top - \tfrac12 X_k (X_k^\top M_k X_k^\top), \qquad
        W_k = (\hat W_k - \hat W_k^\top) / r_k, \\
        M_k &\leftarrow r_k W_k X_k
              \quad (= M_k - X_k\,\mathrm{sym}(X_k^\top M_k), \text{ the tangent projection}), \\
        \alpha_k &= \min\{\mathrm{lr},\; 2q / (\|W_k\|_F + \epsilon)\}, \\
        Y^0 &= X_k - \alpha_k W_k X_k, \qquad
        Y^i = X_k - \tfrac{\alpha_k}{2} W_k (X_k + Y^{i-1}), \quad i = 1, \dots, s, \\
        X_{k+1} &= Y^s.

    :math:`W_k X_k = \hat M_k / \sqrt{\hat v_k + \epsilon}` projected on the
    tangent space, with :math:`\hat M_k = M_k / (1 - \beta_1^k)`, is Adam's
    bias-corrected step direction with one scalar second moment for the whole
    matrix. The fixed-point iteration converges to the Cayley transform
    :math:`Y^\ast = (I + \frac{\alpha}{2} W)^{-1}(I - \frac{\alpha}{2} W) X_k`
    (a point of the manifold) because :math:`\frac{\alpha}{2}\|W\|_2 \le q < 1`
    makes it a contraction; :math:`W` (:math:`n \times n`) is never formed: it
    is applied as :math:`W Z = (M' (X^\top Z) - X (M'^\top Z))/r` with
    :math:`M' = M - \frac12 X X^\top M`, in :math:`O(n s^2)`.

    Two details differ from the printed algorithm, on purpose:

    * The printed initial guess (also in the authors' code) is
      :math:`Y^0 = X_k - \alpha M_k` with the un-normalised momentum, which
      has the scale of the gradient; we use
      :math:`Y^0 = X_k - \alpha W_k X_k`, the first-order expansion of the
      Cayley curve (same fixed point, smaller initial error).
    * After :math:`s` iterations :math:`Y^s` is orthonormal only up to
      :math:`O((\alpha\|W\|)^{s+2})`, and the error accumulates over many
      steps. Each step measures :math:`e = \max|Y^{s\top} Y^s - I|`
      (:math:`O(n s^2)`) and, when :math:`e` exceeds ``ortho_tol``, replaces
      :math:`Y^s` by its nearest orthonormal matrix (polar factor)
      :math:`Y^s (Y^{s\top} Y^s)^{-1/2}`. (The authors' code instead
      re-orthonormalises with a QR at random steps.)

    **Euclidean update** (``stiefel=False``), exactly :class:`torch.optim.Adam`:
    :math:`m_k = \beta_1 m_{k-1} + (1-\beta_1) g_k`,
    :math:`u_k = \beta_2 u_{k-1} + (1-\beta_2) g_k^2` (entrywise),
    :math:`\theta_{k+1} = \theta_k - \mathrm{lr}\, \frac{m_k/(1-\beta_1^k)}{\sqrt{u_k/(1-\beta_2^k)} + \epsilon}`,
    with :math:`g_k` the gradient plus ``weight_decay`` :math:`\cdot\,\theta_k`.

    Parameters
    ----------
    params : iterable of torch.Tensor or of dict
        Parameters or parameter groups (dicts, which may override any option
        below, e.g. ``{"params": net.parameters(), "stiefel": False, "lr": 1e-3}``).
        A Stiefel parameter must be 2-D of shape ``(n, s)``, ``n >= s``, with
        orthonormal columns at the first step (initialise it with
        :func:`random_stiefel`); its ``grad`` is the Euclidean gradient.
    lr : float, default=1e-2
        Learning rate (``l`` in the paper): the largest Cayley step
        :math:`\alpha` for Stiefel parameters; Adam's step for Euclidean ones.
    betas : (float, float), default=(0.9, 0.99)
        :math:`(\beta_1, \beta_2)`, each in ``[0, 1)``.
    eps : float, default=1e-8
        :math:`\epsilon` above.
    q : float, default=0.5
        Contraction factor of the fixed-point iteration, in ``(0, 1)``.
    s : int, default=2
        Number of fixed-point iterations of the Cayley transform (the paper's
        name; unrelated to the number of latent components).
    stiefel : bool, default=True
        Whether the group's parameters live on the Stiefel manifold.
    weight_decay : float, default=0
        L2 penalty added to the gradient of Euclidean parameters only.
    ortho_tol : float or None, default=None
        Re-orthonormalisation threshold on :math:`\max|X^\top X - I|`; ``None``
        means ``max(1e-10, 100 * eps(dtype))``.

    Examples
    --------
    >>> import torch
    >>> from mvkm.stiefel import CayleyAdam, random_stiefel
    >>> B = torch.diag(torch.arange(6, dtype=torch.float64))
    >>> A = torch.nn.Parameter(torch.from_numpy(random_stiefel(6, 2, 0)))
    >>> opt = CayleyAdam([A], lr=0.1)
    >>> for _ in range(300):
    ...     opt.zero_grad()
    ...     loss = -torch.trace(A.T @ B @ A)
    ...     loss.backward()
    ...     opt.step()
    >>> round(-loss.item(), 3)
    9.0
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2,
                 betas: tuple[float, float] = (0.9, 0.99), eps: float = 1e-8,
                 q: float = 0.5, s: int = 2, *, stiefel: bool = True,
                 weight_decay: float = 0.0, ortho_tol: float | None = None) -> None:
        _check_adam_options(lr=lr, betas=betas, eps=eps, q=q, s=s,
                            weight_decay=weight_decay, ortho_tol=ortho_tol)
        defaults = dict(lr=lr, betas=betas, eps=eps, q=q, s=s,
                        stiefel=check_bool(stiefel, "stiefel"),
                        weight_decay=weight_decay, ortho_tol=ortho_tol)
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a parameter group (validating its options), as :class:`torch.optim.Optimizer` does."""
        merged = {**self.defaults, **param_group}
        _check_adam_options(**{k: merged[k] for k in
                               ("lr", "betas", "eps", "q", "s", "weight_decay", "ortho_tol")})
        check_bool(merged["stiefel"], "stiefel")       # a string such as "no" is truthy
        super().add_param_group(param_group)
        self.param_groups[-1]["stiefel"] = bool(self.param_groups[-1]["stiefel"])

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Perform one optimisation step.

        Parameters
        ----------
        closure : callable, optional
            Re-evaluates the model and returns the loss (torch convention).

        Returns
        -------
        The closure's loss, or ``None``.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("CayleyAdam does not support sparse gradients")
                if group["stiefel"]:
                    self._stiefel_step(p, group)
                else:
                    self._adam_step(p, group)
        return loss

    def _stiefel_step(self, p: torch.Tensor, group: dict[str, Any]) -> None:
        if p.ndim != 2 or p.shape[0] < p.shape[1]:
            raise ValueError(
                "a Stiefel parameter must be a 2-D tensor of shape (n, s) with n >= s "
                f"(orthonormal columns), got shape {tuple(p.shape)}; "
                "put other parameters in a group with stiefel=False"
            )
        state = self.state[p]
        if len(state) == 0:
            state.update(_cayley_adam_init(p))
        assert p.grad is not None  # step() only visits parameters with a gradient
        _cayley_adam_update(p, p.grad, state, lr=group["lr"], betas=group["betas"],
                            eps=group["eps"], q=group["q"], n_iter=group["s"],
                            ortho_tol=group["ortho_tol"])

    def _adam_step(self, p: torch.Tensor, group: dict[str, Any]) -> None:
        state = self.state[p]
        if len(state) == 0:
            state["step"] = 0
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        beta1, beta2 = group["betas"]
        grad = p.grad
        assert grad is not None  # step() only visits parameters with a gradient
        if group["weight_decay"] != 0:
            grad = grad.add(p, alpha=group["weight_decay"])
        state["step"] += 1
        k = state["step"]
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.lerp_(grad, 1.0 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
        step_size = group["lr"] / (1.0 - beta1**k)
        denom = (exp_avg_sq.sqrt() / (1.0 - beta2**k) ** 0.5).add_(group["eps"])
        p.addcdiv_(exp_avg, denom, value=-step_size)


def _cayley_adam_init(X: torch.Tensor) -> dict[str, Any]:
    """Check that ``X`` is on the manifold and return a fresh Cayley ADAM state."""
    eye = torch.eye(X.shape[1], dtype=X.dtype, device=X.device)
    err = float((X.T @ X - eye).abs().max())
    tol = max(_STIEFEL_INPUT_TOL, 1e3 * torch.finfo(X.dtype).eps)
    if err > tol:
        raise ValueError(
            "a Stiefel parameter must have orthonormal columns (X^T X = I) at the "
            f"first step; max |X^T X - I| = {err:.3g} exceeds {tol:g}. "
            "Initialise it with mvkm.stiefel.random_stiefel."
        )
    return {
        "step": 0,
        "momentum": torch.zeros_like(X, memory_format=torch.preserve_format),
        "second_moment": torch.zeros((), dtype=X.dtype, device=X.device),
    }


@torch.no_grad()
def _cayley_adam_update(X: torch.Tensor, G: torch.Tensor, state: dict[str, Any], *,
                        lr: float, betas: tuple[float, float], eps: float, q: float,
                        n_iter: int, ortho_tol: float | None) -> None:
    """One Cayley ADAM step on ``X`` in place (the equations of :class:`CayleyAdam`)."""
    beta1, beta2 = betas
    if ortho_tol is None:
        ortho_tol = max(1e-10, 100 * torch.finfo(X.dtype).eps)
    state["step"] += 1
    k = state["step"]
    M = state["momentum"]
    M.mul_(beta1).add_(G, alpha=1.0 - beta1)
    v = state["second_moment"]
    v.mul_(beta2).add_((G * G).sum(), alpha=1.0 - beta2)
    v_hat = v / (1.0 - beta2**k)
    r = (1.0 - beta1**k) * torch.sqrt(v_hat + eps)

    # W = (M' X^T - X M'^T) / r with M' = M - X (X^T M) / 2, never formed.
    Mp = M - 0.5 * (X @ (X.T @ M))
    MptX = Mp.T @ X
    WX = (Mp - X @ MptX) / r  # = W X (uses X^T X = I)
    # ||M' X^T - X M'^T||_F^2 = 2 ||M'||_F^2 - 2 Tr((M'^T X)^2)
    normW = torch.sqrt(torch.clamp(2.0 * (Mp * Mp).sum() - 2.0 * (MptX * MptX.T).sum(),
                                   min=0.0)) / r
    alpha = min(lr, 2.0 * q / (float(normW) + eps))

    def apply_W(Z: torch.Tensor) -> torch.Tensor:
        return (Mp @ (X.T @ Z) - X @ (Mp.T @ Z)) / r

    Y = X - alpha * WX
    for _ in range(n_iter):
        Y = X - (0.5 * alpha) * apply_W(X + Y)
    YtY = Y.T @ Y
    eye = torch.eye(X.shape[1], dtype=X.dtype, device=X.device)
    if float((YtY - eye).abs().max()) > ortho_tol:
        w, V = torch.linalg.eigh(YtY)
        Y = Y @ ((V / torch.sqrt(w)) @ V.T)
    M.copy_(r * WX)  # momentum projected on the tangent space at X_k
    X.copy_(Y)
    state["step_size"] = alpha


def _check_adam_options(*, lr: Any, betas: Any, eps: Any, q: Any, s: Any,
                        weight_decay: Any, ortho_tol: Any) -> None:
    check_positive(lr, "lr")
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
    for i, b in enumerate(betas):
        if isinstance(b, bool) or not isinstance(b, Real) or not 0.0 <= float(b) < 1.0:
            raise ValueError(f"betas[{i}] must be in [0, 1), got {b!r}")
    check_positive(eps, "eps", strict=False)
    if isinstance(q, bool) or not isinstance(q, Real) or not 0.0 < float(q) < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    if isinstance(s, bool) or not isinstance(s, Integral) or s < 1:
        raise ValueError(f"s (the number of Cayley fixed-point iterations) must be an "
                         f"integer >= 1, got {s!r}")
    check_positive(weight_decay, "weight_decay", strict=False)
    if ortho_tol is not None:
        check_positive(ortho_tol, "ortho_tol")


# ---------------------------------------------------------------------------
# Trace maximisation
# ---------------------------------------------------------------------------


class _Ops:
    """The few array operations the solvers need, for numpy or torch arrays."""

    def __init__(self, device: torch.device | None) -> None:
        self.device = device

    def eye(self, s: int) -> Any:
        if self.device is None:
            return np.eye(s)
        return torch.eye(s, dtype=torch.float64, device=self.device)

    def inv_spd(self, S: Any) -> Any:
        if self.device is None:
            return np.linalg.inv(S)
        return torch.linalg.inv(S)

    def asarray(self, X: NDArray[np.float64]) -> Any:
        if self.device is None:
            return X
        return torch.as_tensor(X, dtype=torch.float64, device=self.device)

    def to_numpy(self, X: Any) -> NDArray[np.float64]:
        if self.device is None:
            return np.asarray(X, dtype=np.float64)
        return X.detach().cpu().numpy().astype(np.float64)


def _as_operator(B: Any, n: Any) -> tuple[int, Callable[[NDArray[np.float64]], Any], Any]:
    """Validate ``B`` and return (n, numpy matmat, dense ndarray or None)."""
    dense = None
    if isinstance(B, LinearOperator):
        if len(B.shape) != 2 or B.shape[0] != B.shape[1]:
            raise ValueError(f"B must be a square LinearOperator, got shape {B.shape}")
        size = int(B.shape[0])
        matmat = lambda X: np.asarray(B.matmat(X))  # noqa: E731
    elif sp.issparse(B):
        Bs = check_sparse_symmetric(B, "B")
        size = int(Bs.shape[0])
        matmat = lambda X: np.asarray(Bs @ X)  # noqa: E731
    elif callable(B) and not isinstance(B, (np.ndarray, torch.Tensor)):
        if n is None:
            raise ValueError("n (the size of B) is required when B is a callable "
                             "X -> B @ X; pass maximize_trace(B, s, n=...)")
        return int(n), B, None
    else:
        dense = check_symmetric(B, "B")
        size = dense.shape[0]
        matmat = lambda X: dense @ X  # noqa: E731
    if n is not None and n != size:
        raise ValueError(f"n = {n} does not match the shape of B, {B.shape}")
    return size, matmat, dense


def _check_device(device: Any) -> torch.device:
    """The torch device, checked to exist (``"cpu"`` selects the numpy path of "cayley-bb")."""
    try:
        dev = torch.device(device)
    except (TypeError, RuntimeError) as exc:
        raise ValueError(f"device must be 'cpu', 'cuda' or a torch.device, got {device!r}") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but no CUDA device is available "
                         "(torch.cuda.is_available() is False); use device='cpu'")
    check_torch_device(device)
    return dev


def maximize_trace(
    B: Any,
    n_components: int,
    *,
    method: str = "cayley-bb",
    n: int | None = None,
    A0: ArrayLike | None = None,
    tol: float = 1e-8,
    max_iter: int | None = None,
    lr: float | None = None,
    random_state: Any = None,
    progress: bool = False,
    return_history: bool = False,
    device: Any = "cpu",
    rotate: bool = True,
) -> NDArray[np.float64] | tuple[NDArray[np.float64], dict[str, Any]]:
    r"""Maximise :math:`\mathrm{Tr}(A^\top B A)` over :math:`A \in \mathrm{St}(n, s)`.

    For symmetric :math:`B` with eigenvalues :math:`\lambda_1 \ge \dots \ge \lambda_n`
    the maximum is :math:`\lambda_1 + \dots + \lambda_s` (Ky Fan), attained
    exactly by the orthonormal bases of a top-:math:`s` invariant subspace
    (Proposition 3.3 of :cite:`achten2023duality`; Problems (8) and (12) there
    are this problem with :math:`B = C` and :math:`B = K`). The solver never
    factorises :math:`B`: it only needs products :math:`B A` with
    :math:`n \times s` blocks.

    **Method "cayley-bb"** (default): the curvilinear search of
    :cite:`wen2013feasible` with the Barzilai-Borwein steps of
    :cite:`barzilai1988two` and the non-monotone line search of
    :cite:`zhang2004nonmonotone`. At :math:`A_k`, with
    :math:`\Gamma_k = A_k^\top B A_k`, :math:`f_k = \mathrm{Tr}\,\Gamma_k` and
    the Riemannian gradient :math:`R_k = B A_k - A_k \Gamma_k` (which satisfies
    :math:`A_k^\top R_k = 0`), the next iterate lies on the Cayley curve of
    :math:`W_k = R_k A_k^\top - A_k R_k^\top`,

    .. math::

        A(\tau) = \Bigl(I - \tfrac\tau2 W_k\Bigr)^{-1}\Bigl(I + \tfrac\tau2 W_k\Bigr) A_k
                = (2 A_k + \tau R_k)\Bigl(I_s + \tfrac{\tau^2}{4} R_k^\top R_k\Bigr)^{-1} - A_k,

    an orthonormal curve with :math:`A'(0) = R_k`. The closed form (the
    Sherman-Morrison-Woodbury identity applied to the rank-:math:`2s` matrix
    :math:`W_k`, simplified with :math:`A_k^\top R_k = 0`) needs one
    :math:`s \times s` inverse, so a step costs :math:`O(n s^2)` besides one
    product :math:`B A(\tau)`. The trial step is
    :math:`\tau_k = \langle S, S\rangle / |\langle S, Y\rangle|` (odd :math:`k`) or
    :math:`|\langle S, Y\rangle| / \langle Y, Y\rangle` (even :math:`k`), with
    :math:`S = A_k - A_{k-1}`, :math:`Y = R_k - R_{k-1}`; it is multiplied by
    0.2 until the non-monotone Armijo condition
    :math:`f(A(\tau)) \ge C_k + 2\rho\tau \|R_k\|_F^2` holds
    (:math:`\rho = 10^{-4}`; :math:`2\|R_k\|_F^2` is the slope of
    :math:`f(A(\tau))` at 0), where :math:`C_{k+1} = (\gamma Q_k C_k + f_{k+1})/Q_{k+1}`,
    :math:`Q_{k+1} = \gamma Q_k + 1`, :math:`C_0 = f_0`, :math:`Q_0 = 1`,
    :math:`\gamma = 0.85`.

    **Method "cayley-adam"** runs the update of :class:`CayleyAdam` (default
    ``betas``, ``eps``, ``q``, ``s``; learning rate ``lr``) in torch on the loss
    :math:`-\mathrm{Tr}(A^\top B A)` (full batch, Euclidean gradient
    :math:`-2BA`), the optimiser the source paper uses. It is much slower (first order,
    linear rate set by the eigengap and ``lr``) and is there for teaching and
    comparison.

    **Stopping.** Both methods stop at the first iterate with relative gradient

    .. math:: \frac{\|R_k\|_F}{\|B A_k\|_F} = \frac{\|(I - A_k A_k^\top) B A_k\|_F}{\|B A_k\|_F} \le \mathrm{tol},

    a number in :math:`[0, 1]` (the sine of the angle between :math:`BA_k` and
    its projection on :math:`\mathrm{range}(A_k)`; at the optimum
    :math:`\|BA\|_F = \|\Gamma\|_F`). Near the maximiser, writing
    :math:`A = V_1 C + V_2 E` in the eigenbasis, the gap to the optimum is
    :math:`\sum_{i \le s < j} (\lambda_i - \lambda_j) e_{ji}^2` while
    :math:`\|R\|_F^2 \approx \sum (\lambda_i - \lambda_j)^2 e_{ji}^2`, so to leading order

    .. math:: \sum_{i\le s}\lambda_i - \mathrm{Tr}(A^\top B A) \lesssim
              \frac{\|R\|_F^2}{\lambda_s - \lambda_{s+1}}
              = \mathrm{tol}^2\, \frac{\|BA\|_F^2}{\lambda_s - \lambda_{s+1}}:

    for positive semi-definite :math:`B`, :math:`\|BA\|_F^2 \le \lambda_1 \sum_{i \le s}\lambda_i`,
    so the relative objective gap is at most about
    :math:`\mathrm{tol}^2 \lambda_1 / (\lambda_s - \lambda_{s+1})`, and the
    largest angle between :math:`\mathrm{range}(A)` and the top eigenspace about
    :math:`\mathrm{tol}\, \|BA\|_F / (\lambda_s - \lambda_{s+1})`. The
    default ``tol=1e-8`` gives eigenvectors to about 8 digits when the
    relative eigengap is of order one (the relative gradient bottoms out at
    round-off, about :math:`10^{-15}`). The iteration runs on :math:`B/c`, with
    :math:`c` a power of two near :math:`\max|BA_0|`, so it is scale invariant
    (the same iterates for :math:`B` at :math:`10^{-200}` or :math:`10^{150}`).
    A zero gradient also holds at the other stationary points (an eigenvector
    start is one): after convergence, a Krylov basis of about 12 vectors of
    :math:`(I - AA^\top) B (I - AA^\top)` (one product each) checks the
    second-order condition :math:`u^\top B u \le \lambda_{\min}(A^\top B A)` for
    :math:`u \perp \mathrm{range}(A)`; a direction that violates it replaces the
    worst direction of :math:`A` and the iteration goes on (at most 3 times).
    This check is probabilistic (a random Krylov start), not a certificate. If ``max_iter``
    is reached first a :class:`RuntimeWarning` is emitted and the last
    iterate is returned. A ``tol`` below what float64 products resolve
    (the relative gradient of "cayley-bb" bottoms out near :math:`10^{-16}`;
    "cayley-adam"'s steps stall higher, near :math:`10^{-10}`) is not waited
    for: the run stops at *stagnation*, with a
    :class:`~mvkm.linalg.ConvergenceWarning` (a ``RuntimeWarning``) that says
    so, when over the last 20 iterations (500 for "cayley-adam") the objective
    has risen by no more than its round-off,
    :math:`n\varepsilon\max(|f_k|, \|BA_k\|_F)`, and the smallest relative
    gradient has not halved, and (for "cayley-bb") lies below
    :math:`10\sqrt{n}\,\varepsilon`, the round-off of a relative gradient. The iterate of
    smallest relative gradient is returned, and it gets the second-order
    check too. A run that still converges halves its gradient now and then
    and is not stopped.

    Parameters
    ----------
    B : ndarray of shape (n, n), scipy sparse matrix, LinearOperator or callable
        Symmetric matrix, or an operator computing :math:`B X` for an
        ``(n, k)`` block: a :class:`scipy.sparse.linalg.LinearOperator` (its
        ``matmat``) or a callable ``X -> B @ X`` taking and returning numpy
        float64 arrays (then ``n`` is required). Symmetry of operators is
        assumed, not checked.
    n_components : int
        :math:`s`, the number of columns, ``1 <= s <= n``.
    method : {"cayley-bb", "cayley-adam"}, default="cayley-bb"
    n : int, optional
        Size of :math:`B`; required when ``B`` is a callable.
    A0 : array_like of shape (n, s), optional
        Starting point with orthonormal columns (``max|A0^T A0 - I| <= 1e-6``).
        Default: :func:`~mvkm.stiefel.random_stiefel` with ``random_state``.
    tol : float, default=1e-8
        Tolerance on the relative gradient above, ``0 < tol < 1``.
    max_iter : int, optional
        Maximum number of iterations (one product with :math:`B` each, plus
        backtracking); default 1000 for "cayley-bb" and 20000 for "cayley-adam".
    lr : float, optional
        "cayley-bb": the first trial step :math:`\tau_0` (default
        :math:`1/\|B A_0\|_F`); "cayley-adam": the learning rate of
        :class:`CayleyAdam` (default 1.0: the step is capped by
        :math:`2q/\|W\|_F` anyway and the gradient is normalised, so this is
        scale-free).
    random_state : None, int or numpy.random.Generator
        Seed of the random starting point.
    progress : bool, default=False
        Show a ``tqdm`` progress bar.
    return_history : bool, default=False
        Also return the convergence history.
    device : str or torch.device, default="cpu"
        ``"cpu"`` runs "cayley-bb" in numpy; any other device (e.g. ``"cuda"``)
        runs it in torch on that device (a dense ``B`` is moved there once;
        operators are called with numpy arrays). "cayley-adam" always runs in
        torch on ``device``.
    rotate : bool, default=True
        Rotate the solution, :math:`A \leftarrow A Q` with
        :math:`\Gamma = Q \Lambda Q^\top`, so that :math:`A^\top B A` is diagonal
        with descending entries and the columns approximate eigenvectors
        (:func:`mvkm.linalg.rotate_to_diagonal`; signs by
        :func:`mvkm.linalg.flip_signs`).

    Returns
    -------
    A : ndarray of shape (n, s)
        Orthonormal columns maximising :math:`\mathrm{Tr}(A^\top B A)`.
    history : dict
        Only with ``return_history=True``. ``"objective"`` and ``"grad_norm"``:
        arrays of :math:`\mathrm{Tr}(A_k^\top B A_k)` and of the relative
        gradient for :math:`k = 0, \dots,` ``n_iter``; ``"step_size"``: the
        accepted :math:`\tau_k` (or Cayley ADAM's :math:`\alpha_k`), length
        ``n_iter``; ``"n_iter"`` (int), ``"converged"`` (bool), ``"stagnated"``
        (bool: stopped at stagnation above ``tol``),
        ``"n_products"`` (int, number of products :math:`BX`), ``"Gamma"``:
        the final :math:`A^\top B A` (``(s, s)``, diagonal after rotation).

    Raises
    ------
    ValueError
        On a non-square, non-symmetric or non-finite ``B``, an ``n_components``
        outside ``[1, n]``, an unknown ``method``, ``tol`` outside (0, 1), a bad
        ``max_iter`` or ``lr``, an ``A0`` of the wrong shape or without
        orthonormal columns, or an unavailable ``device``.

    See Also
    --------
    mvkm.linalg.top_eigh : the same subspace from an eigensolver.
    CayleyAdam : the stochastic optimiser.

    Examples
    --------
    >>> import numpy as np
    >>> from mvkm.stiefel import maximize_trace
    >>> B = np.diag([5.0, 4.0, 3.0, 2.0, 1.0])
    >>> A = maximize_trace(B, 2, random_state=0)
    >>> np.round(np.abs(A), 6)
    array([[1., 0.],
           [0., 1.],
           [0., 0.],
           [0., 0.],
           [0., 0.]])
    """
    check_bool(progress, "progress")
    check_bool(return_history, "return_history")
    check_bool(rotate, "rotate")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if n is not None:
        n = check_count(n, "n")
    size, matmat, Bd = _as_operator(B, None if n is None else int(n))
    s = check_n_components(n_components, size, what="the size n of B")
    tol = check_positive(tol, "tol")
    if not tol < 1.0:
        raise ValueError(f"tol must be in (0, 1) (a relative gradient lies in [0, 1]), got {tol!r}")
    if max_iter is None:
        max_iter = _DEFAULT_MAX_ITER[method]
    max_iter = check_count(max_iter, "max_iter")
    if lr is not None:
        lr = check_positive(lr, "lr")
    dev = _check_device(device)

    if A0 is None:
        X0 = random_stiefel(size, s, random_state)
    else:
        X0 = _check_stiefel(A0, "A0", shape=(size, s))
        if orthonormality_error(X0) > 1e-13:
            X0 = _polar_np(X0)

    def checked(X: NDArray[np.float64]) -> NDArray[np.float64]:
        Y = np.asarray(matmat(X), dtype=np.float64)
        if Y.shape != X.shape:
            raise ValueError(f"B @ X must have shape {X.shape}, got {Y.shape}")
        if not np.all(np.isfinite(Y)):
            raise ValueError("B @ X contains NaN or infinite values")
        return Y

    use_numpy = method == "cayley-bb" and dev.type == "cpu"
    ops = _Ops(None if use_numpy else dev)
    if use_numpy:
        apply_B: Callable[[Any], Any] = matmat if Bd is not None else checked
    elif Bd is not None:
        Bt = torch.as_tensor(Bd, dtype=torch.float64, device=dev)
        apply_B = lambda X: Bt @ X  # noqa: E731
    else:
        apply_B = lambda X: ops.asarray(checked(ops.to_numpy(X)))  # noqa: E731

    # Scale invariance: the solvers run on B / c with c a power of two (exact) near
    # max|B A0|, so that no norm underflows or overflows (B at 1e-200 made every
    # squared norm 0 and the start "converged"); Gamma and the objective are scaled back.
    X_start = X0 if use_numpy else ops.asarray(X0)
    first = [X_start, checked(X0)]
    top = float(np.abs(first[1]).max())
    c = math.ldexp(1.0, min(max(math.frexp(top)[1] - 1, -1000), 1000)) if top > 0.0 else 1.0
    first[1] = first[1] / c
    inv_c = 1.0 / c
    apply_raw = apply_B

    def apply_scaled(X: Any, _first=first) -> Any:
        if _first and X is _first[0]:
            BX = _first[1]
            _first.clear()
            return ops.asarray(BX)
        return apply_raw(X) * inv_c

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=max_iter, desc=f"maximize_trace ({method})")
    rng = check_random_state(random_state)
    lr_scaled = None if lr is None else (lr * c if method == "cayley-bb" else lr)
    total: dict[str, Any] | None = None
    try:
        # A stationary point need not be the maximum: a start on another invariant
        # subspace (an eigenvector start) has zero gradient. After convergence a few
        # Lanczos steps on (I - A A^T) B (I - A A^T) look for a direction better than
        # the worst column of A (second-order check); one found is swapped in and the
        # iteration goes on (at most _MAX_ESCAPES times).
        for escape in range(_MAX_ESCAPES + 1):
            budget = int(max_iter) - (0 if total is None else total["n_iter"])
            if method == "cayley-bb":
                X, Gamma, hist = _cayley_bb(apply_scaled, X_start, ops, tol=tol,
                                            max_iter=max(budget, 0), tau0=lr_scaled, bar=bar)
            else:
                X, Gamma, hist = _cayley_adam_trace(apply_scaled, X_start, ops, tol=tol,
                                                    max_iter=max(budget, 0),
                                                    lr=_DEFAULT_ADAM_LR if lr is None else lr,
                                                    bar=bar)
            total = hist if total is None else _join_histories(total, hist)
            if not (hist["converged"] or hist["stagnated"]):   # a stagnated point is checked too
                break
            A_np = ops.to_numpy(X)
            better = _escape_direction(lambda Z: checked(Z) * inv_c,
                                       A_np, ops.to_numpy(Gamma), tol, rng)
            total["n_products"] += better[1]
            if better[0] is None:
                break
            if escape == _MAX_ESCAPES:
                total["converged"] = False
                warnings.warn(
                    f"maximize_trace ({method}) kept converging to stationary points that are "
                    f"not the maximum ({_MAX_ESCAPES} escapes); returning the last one",
                    RuntimeWarning, stacklevel=2)
                break
            X_start = ops.asarray(better[0])
    finally:
        if bar is not None:
            bar.close()
    hist = total
    hist["objective"] = hist["objective"] * c
    if method == "cayley-bb":   # steps tau for B / c are c times those for B
        hist["step_size"] = hist["step_size"] * inv_c
    A = ops.to_numpy(X)
    Gamma = ops.to_numpy(Gamma) * c
    if orthonormality_error(A) > 1e-12:  # round-off drift over many iterations
        A = _polar_np(A)
    if hist["stagnated"] and not hist["converged"]:
        g = hist["grad_norm"]
        window = _STAGNATION_WINDOW[method]
        warnings.warn(
            f"maximize_trace ({method}) stopped at iteration {hist['n_iter']} of max_iter="
            f"{max_iter}: it has stagnated, the objective Tr(A^T B A) rising by no more than its "
            f"round-off over the last {window} iterations and the relative gradient making no "
            f"new minimum (it stays near {float(np.min(g[-window:])):.3g}, above tol={tol:g}); "
            "the result is as accurate as float64 products allow here: raise tol to about "
            f"{2 * float(np.min(g[-window:])):.1g} to silence this",
            ConvergenceWarning, stacklevel=2)
    elif not hist["converged"] and hist["grad_norm"][-1] > tol:
        warnings.warn(
            f"maximize_trace ({method}) did not converge in max_iter={max_iter} iterations: "
            f"relative gradient {hist['grad_norm'][-1]:.3g} > tol={tol:g}; "
            "increase max_iter or tol",
            RuntimeWarning, stacklevel=2,
        )
    if rotate:
        A, evals = rotate_to_diagonal(A, Gamma)
        Gamma = np.diag(evals)
    if not return_history:
        return A
    hist["Gamma"] = Gamma
    return A, hist


_MAX_ESCAPES = 3
_ESCAPE_KRYLOV_STEPS = 12


def _join_histories(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The history of a run continued by ``b`` (``b`` starts where ``a`` escaped)."""
    return {
        "objective": np.concatenate([a["objective"], b["objective"]]),
        "grad_norm": np.concatenate([a["grad_norm"], b["grad_norm"]]),
        "step_size": np.concatenate([a["step_size"], b["step_size"]]),
        "n_iter": a["n_iter"] + b["n_iter"],
        "converged": b["converged"],
        "stagnated": b["stagnated"],
        "n_products": a["n_products"] + b["n_products"],
    }


def _escape_direction(matmat: Callable[[NDArray[np.float64]], NDArray[np.float64]],
                      A: NDArray[np.float64], Gamma: NDArray[np.float64], tol: float,
                      rng: np.random.Generator) -> tuple[NDArray[np.float64] | None, int]:
    r"""Second-order check of a stationary point ``A``; a better start if it fails.

    At the maximum, no unit :math:`u \perp \mathrm{range}(A)` has
    :math:`u^\top B u > \lambda_{\min}(\Gamma)` (else swapping it for the worst
    direction of :math:`A` raises the trace). A Krylov basis of
    :math:`(I - AA^\top) B (I - AA^\top)` of a few vectors (one product each)
    from a random start gives a lower bound :math:`\theta` of the top of that
    operator; if :math:`\theta > \lambda_{\min}(\Gamma) + m` with
    :math:`m = \max(\mathrm{tol}, \sqrt{\varepsilon})\,\|\Gamma\|_2`, the start
    ``A`` with its worst direction replaced by the Ritz vector is returned.
    Returns ``(None or the new start, products used)``.
    """
    n, s = A.shape
    steps = min(_ESCAPE_KRYLOV_STEPS, n - s)
    if steps <= 0:
        return None, 0
    w, P = np.linalg.eigh(0.5 * (Gamma + Gamma.T))
    margin = max(tol, math.sqrt(np.finfo(float).eps)) * max(float(np.abs(w).max()), np.finfo(float).tiny)
    Q = np.empty((n, steps))
    BQ = np.empty((n, steps))
    q = rng.standard_normal(n)
    used = 0
    for j in range(steps):
        for _ in range(2):   # orthogonal to range(A) and to the basis so far
            q -= A @ (A.T @ q)
            q -= Q[:, :j] @ (Q[:, :j].T @ q)
        norm = float(np.linalg.norm(q))
        if not norm > 1e-10 * (float(np.linalg.norm(BQ[:, j - 1])) if j else 1.0):
            break                   # an invariant subspace: the basis is complete
        Q[:, j] = q / norm
        BQ[:, j] = matmat(Q[:, j : j + 1])[:, 0]
        used = j + 1
        q = BQ[:, j].copy()
    if used == 0:
        return None, 0
    T = Q[:, :used].T @ BQ[:, :used]
    theta, Y = np.linalg.eigh(0.5 * (T + T.T))
    if not theta[-1] > w[0] + margin:
        return None, used
    u = Q[:, :used] @ Y[:, -1]
    u -= A @ (A.T @ u)
    u /= np.linalg.norm(u)
    A_new = A @ P                   # columns: eigenvectors of Gamma, the worst first
    A_new[:, 0] = u
    return A_new, used


def _history(obj: list[float], grad: list[float], steps: list[float], converged: bool,
             n_products: int, stagnated: bool = False) -> dict[str, Any]:
    return {
        "objective": np.asarray(obj),
        "grad_norm": np.asarray(grad),
        "step_size": np.asarray(steps),
        "n_iter": len(steps),
        "converged": bool(converged),
        "stagnated": bool(stagnated),
        "n_products": int(n_products),
    }


#: Iterations over which a run must raise its objective beyond round-off, or halve its smallest
#: relative gradient, not to count as stagnated (Cayley ADAM's steps oscillate for longer).
_STAGNATION_WINDOW = {"cayley-bb": 20, "cayley-adam": 500}
#: "cayley-bb" stagnates only once its relative gradient is below this multiple of sqrt(n) eps,
#: the round-off of a relative gradient (measured: 2e-17 to 1e-16 at n = 8 to 60); a descent
#: still above it goes on, however slowly (a tiny eigengap: 1e-12 to 1e-14 after 500 steps).
_STAGNATION_FACTOR = 1.0


def _stagnated(objective: list[float], grad_norm: list[float], n: int, size: float,
               window: int, at_round_off: bool) -> bool:
    r"""Whether the last ``window`` iterations made no progress a float64 run can show.

    All hold: the objective rose by no more than its round-off,
    :math:`n\varepsilon\max(|f|, \|BA\|_F)` (``size`` is :math:`\|BA\|_F`), above its
    value ``window`` iterations ago; the smallest relative gradient did not halve; and, with
    ``at_round_off``, it lies below ``_STAGNATION_FACTOR`` :math:`\sqrt{n}\,\varepsilon`. A run
    whose ``tol`` lies below what its products resolve (``tol=1e-300``) wanders at that
    floor for ever; one that still converges halves its gradient now and then.
    """
    if len(objective) <= window:
        return False
    eps = np.finfo(float).eps
    recent = objective[-window - 1:]
    floor = n * eps * max(max(abs(f) for f in recent), size)
    if max(recent[1:]) - recent[0] > floor:
        return False
    best = min(grad_norm[-window:])
    if at_round_off and best > _STAGNATION_FACTOR * math.sqrt(n) * eps:
        return False
    return best > 0.5 * min(grad_norm[:-window])


def _cayley_bb(apply_B: Callable[[Any], Any], X: Any, ops: _Ops, *, tol: float,
               max_iter: int, tau0: float | None, bar: Any) -> tuple[Any, Any, dict[str, Any]]:
    """Wen-Yin curvilinear search with BB steps (maximisation form). Works on numpy or torch."""
    rho, gamma_nm, shrink, max_backtrack = 1e-4, 0.85, 0.2, 12
    tiny = np.finfo(float).tiny
    s = X.shape[1]
    eye = ops.eye(s)

    def evaluate(Y: Any) -> tuple[Any, Any, float, float, float]:
        BY = apply_B(Y)
        Gam = Y.T @ BY
        Gam = 0.5 * (Gam + Gam.T)
        R = BY - Y @ Gam
        # Second projection: Y^T R is then O(|Y^T Y - I|^2) instead of O(|Y^T Y - I| |Gamma|);
        # without it the closed-form Cayley step amplifies round-off drift by ~tau |Gamma|.
        R = R - Y @ (Y.T @ R)
        nR2 = float((R * R).sum())
        nBY = math.sqrt(float((BY * BY).sum()))
        return Gam, R, float(Gam.trace()), nR2, nBY

    Gam, R, f, nR2, nBX = evaluate(X)
    n_products = 1
    rel = math.sqrt(nR2) / max(nBX, tiny)
    objective, grad_norm, steps = [f], [rel], []
    converged = rel <= tol
    tau = tau0 if tau0 is not None else 1.0 / max(nBX, tiny)
    C, Q = f, 1.0
    k = 0
    n = X.shape[0]
    stagnated = False
    best = (rel, X, Gam)       # at stagnation the iterate of smallest gradient is returned
    while not converged and k < max_iter:
        # curvilinear search along A(tau) = (2X + tau R)(I + tau^2/4 R^T R)^{-1} - X
        S = R.T @ R
        twoX = 2.0 * X
        for trial in range(max_backtrack):
            Y = (twoX + tau * R) @ ops.inv_spd(eye + (0.25 * tau * tau) * S) - X
            Gam_new, R_new, f_new, nR2_new, nBY = evaluate(Y)
            n_products += 1
            if f_new >= C + 2.0 * rho * tau * nR2 or trial == max_backtrack - 1:
                break
            tau *= shrink
        k += 1
        steps.append(tau)
        # Barzilai-Borwein step for the next iteration
        dX = Y - X
        dR = R_new - R
        SS = float((dX * dX).sum())
        SY = abs(float((dX * dR).sum()))
        YY = float((dR * dR).sum())
        X, Gam, R, f, nR2, nBX = Y, Gam_new, R_new, f_new, nR2_new, nBY
        rel = math.sqrt(nR2) / max(nBX, tiny)
        objective.append(f)
        grad_norm.append(rel)
        converged = rel <= tol
        if SY > 0.0:
            tau = SS / SY if k % 2 == 1 else SY / max(YY, tiny)
            tau = min(max(tau, 1e-20), 1e20)
        Q_old = Q
        Q = gamma_nm * Q + 1.0
        C = (gamma_nm * Q_old * C + f) / Q
        if bar is not None:
            bar.update(1)
            bar.set_postfix(rel_grad=f"{rel:.2e}", refresh=False)
        if rel < best[0]:
            best = (rel, X, Gam)
        if not converged and _stagnated(objective, grad_norm, n, nBX,
                                        _STAGNATION_WINDOW["cayley-bb"], at_round_off=True):
            stagnated = True
            X, Gam = best[1], best[2]
            break
    return X, Gam, _history(objective, grad_norm, steps, converged, n_products, stagnated)


def _cayley_adam_trace(apply_B: Callable[[Any], Any], X0: Any, ops: _Ops, *, tol: float,
                       max_iter: int, lr: float, bar: Any) -> tuple[Any, Any, dict[str, Any]]:
    """Full-batch Cayley ADAM on the loss -Tr(A^T B A); the Euclidean gradient is -2 B A.

    Calls the update of :class:`CayleyAdam` directly (default ``betas``, ``eps``,
    ``q``, ``s``), which skips the one-off import cost of ``torch.optim``'s machinery.
    """
    tiny = np.finfo(float).tiny
    A = torch.as_tensor(X0, dtype=torch.float64, device=ops.device).clone()
    state = _cayley_adam_init(A)
    objective: list[float] = []
    grad_norm: list[float] = []
    steps: list[float] = []
    converged = stagnated = False
    n_products = 0
    n = A.shape[0]
    best: tuple[float, Any, Any] = (np.inf, None, None)   # returned at stagnation
    for k in range(max_iter + 1):
        BA = apply_B(A)
        n_products += 1
        Gam = A.T @ BA
        Gam = 0.5 * (Gam + Gam.T)
        R = BA - A @ Gam
        nBA = math.sqrt(float((BA * BA).sum()))
        rel = math.sqrt(float((R * R).sum())) / max(nBA, tiny)
        objective.append(float(Gam.trace()))
        grad_norm.append(rel)
        if rel <= tol:
            converged = True
            break
        if k == max_iter:
            break
        if rel < best[0]:
            best = (rel, A.clone(), Gam)
        if _stagnated(objective, grad_norm, n, nBA, _STAGNATION_WINDOW["cayley-adam"],
                      at_round_off=False):
            stagnated = True
            A, Gam = best[1], best[2]
            break
        _cayley_adam_update(A, -2.0 * BA, state, lr=lr, betas=(0.9, 0.99), eps=1e-8, q=0.5,
                            n_iter=2, ortho_tol=None)
        steps.append(state["step_size"])
        if bar is not None:
            bar.update(1)
            bar.set_postfix(rel_grad=f"{rel:.2e}", refresh=False)
    return A, Gam, _history(objective, grad_norm, steps, converged, n_products, stagnated)
