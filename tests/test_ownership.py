"""A fitted model owns its training data (issue 35, item 4): editing the
caller's array after ``fit`` does not change the model, unless the user asked
for a reference with ``copy_X=False``."""

import numpy as np
import pytest

import mvkm
from mvkm import KernelPPCA, LowRankSMM, MultiViewKPLS, MultiViewRKM

rng = np.random.default_rng(0)
X = rng.standard_normal((30, 4))
Y = rng.standard_normal((30, 3))
M = rng.standard_normal((30, 4, 3))
labels = np.where(rng.standard_normal(30) > 0, 1, -1)


def _fits():
    """(name, fit on arrays, output after fit) for each estimator and route."""
    rff = mvkm.RandomFourierFeatures(sigma=2.0, n_features=50,
                                     random_state=0)
    return [
        ("ppca dual", lambda a, c: KernelPPCA(2, kernel=mvkm.RBF(2.0),
                                              copy_X=c).fit(a[0]),
         lambda m: m.transform(X)),
        ("ppca primal rff", lambda a, c: KernelPPCA(
            2, feature_map=rff, formulation="primal", copy_X=c).fit(a[0]),
         lambda m: m.transform(X)),
        ("rkm dual", lambda a, c: MultiViewRKM(
            2, kernels=[mvkm.RBF(2.0), mvkm.RBF(2.0)], copy_X=c).fit(a),
         lambda m: m.transform([X, Y])),
        ("kpls dual", lambda a, c: MultiViewKPLS(
            2, kernels=[mvkm.RBF(2.0), mvkm.RBF(2.0)], copy_X=c).fit(a),
         lambda m: m.transform([X, Y])[0]),
    ]


@pytest.mark.parametrize("case", _fits(), ids=lambda c: c[0])
def test_editing_the_callers_array_does_not_change_the_model(case):
    _, fit, out = case
    a = [X.copy(), Y.copy()]
    model = fit(a, True)
    before = out(model)
    a[0] *= 3.0
    a[1] += 1.0
    np.testing.assert_array_equal(out(model), before)


@pytest.mark.parametrize("case", [c for c in _fits() if "primal" not in c[0]],
                         ids=lambda c: c[0])
def test_copy_X_false_keeps_a_reference(case):
    # (the primal transform reads no training data: nothing to observe)
    _, fit, out = case
    a = [X.copy(), Y.copy()]
    model = fit(a, False)
    before = out(model)
    a[0] *= 3.0
    assert not np.array_equal(out(model), before)


def test_the_smm_owns_its_matrices():
    a = M.copy()
    model = LowRankSMM(rank=1, C=1.0).fit(a, labels)
    before = model.decision_function(M)
    a *= 3.0
    np.testing.assert_array_equal(model.decision_function(M), before)
    ref = LowRankSMM(rank=1, C=1.0, copy_X=False).fit(a, labels)
    a *= 2.0
    assert not np.array_equal(ref.decision_function(M),
                              LowRankSMM(rank=1, C=1.0).fit(
                                  a / 2.0, labels).decision_function(M))


@pytest.mark.parametrize("est", [KernelPPCA(1), MultiViewRKM(1),
                                 MultiViewKPLS(1), LowRankSMM()])
def test_copy_X_must_be_a_bool(est):
    est.set_params(copy_X="no")
    data = M if isinstance(est, LowRankSMM) else (
        X if isinstance(est, KernelPPCA) else [X, Y])
    args = (data, labels) if isinstance(est, LowRankSMM) else (data,)
    with pytest.raises(TypeError, match="copy_X"):
        est.fit(*args)
