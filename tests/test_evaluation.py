"""mvkm.evaluation: the seeds of an experiment and paired intervals."""

import numpy as np
import pytest
from scipy import stats

from mvkm.evaluation import experiment_seeds, paired_interval, parse_seeds


def test_seeds_parse_ranges_and_lists():
    assert parse_seeds("300-303") == [300, 301, 302, 303]
    assert parse_seeds("1, 4,7") == [1, 4, 7]
    assert parse_seeds("0-1,10") == [0, 1, 10]
    assert parse_seeds(5) == [5]


@pytest.mark.parametrize("bad", ["", ",", "a-b", "3-1", "1.5", "1-2-3"])
def test_bad_seeds_are_refused_naming_the_argument(bad):
    with pytest.raises(ValueError, match="seeds"):
        parse_seeds(bad)


def test_seeds_of_the_wrong_type_are_refused():
    with pytest.raises(TypeError, match="seeds"):
        parse_seeds([1, 2])


def test_the_environment_overrides_the_default(monkeypatch):
    monkeypatch.delenv("MVKM_SEEDS", raising=False)
    assert experiment_seeds("0-2") == [0, 1, 2]
    monkeypatch.setenv("MVKM_SEEDS", "300-301")
    assert experiment_seeds("0-2") == [300, 301]
    monkeypatch.setenv("MVKM_SEEDS", "")          # empty: the default
    assert experiment_seeds("0-2") == [0, 1, 2]


def test_the_interval_is_the_t_interval_of_the_differences():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=12), rng.normal(size=12)
    r = paired_interval(a, b, level=0.9)
    ref = stats.ttest_rel(a, b).confidence_interval(0.9)   # independent route
    assert np.isclose(r["low"], ref.low) and np.isclose(r["high"], ref.high)
    assert r["n"] == 12 and r["wins"] == int(np.sum(a > b))


def test_verdicts_follow_the_interval():
    base = np.linspace(0, 1, 10)
    noise = 0.01 * np.sin(np.arange(10))
    assert paired_interval(base + 0.1 + noise, base)["verdict"] == "higher"
    assert paired_interval(base - 0.1 + noise, base)["verdict"] == "lower"
    assert paired_interval(base + noise, base)["verdict"] == "tied"
    assert paired_interval([1.0], [0.0])["verdict"] == "tied"


def test_bad_pairs_are_refused():
    with pytest.raises(ValueError, match="a and b"):
        paired_interval([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="level"):
        paired_interval([1, 2], [0, 1], level=1.5)
    with pytest.raises(ValueError, match="finite"):
        paired_interval([1, np.nan], [0, 1])
