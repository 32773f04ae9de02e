"""The runtime a registered fingerprint carries: its boosters read from their model text and their
trees walked in numpy, without LightGBM's library (``runtime.TextBooster``, since 0.9.35)."""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tracker.fingerprint import runtime


def _queries(rng: np.random.Generator, n: int, columns: int, scales: np.ndarray) -> np.ndarray:
    """Rows as a prediction meets them: ordinary values, and NaN, 0, values within LightGBM's zero
    threshold of 0, and infinities, where a tree's rule for missing values and zeros decides."""
    q = rng.normal(size=(n, columns)) * scales
    for value, share in ((np.nan, 0.15), (0.0, 0.1), (1e-40, 0.05), (-1e-40, 0.05), (np.inf, 0.03), (-np.inf, 0.03)):
        q[rng.random(q.shape) < share] = value
    return q


@pytest.mark.parametrize("params", [
    {},  # the fingerprint's own settings (train.LGBM_PARAMS): NaN learnt as missing
    {"zero_as_missing": True},  # zeros as missing: splits of LightGBM's "zero" kind
    {"use_missing": False},  # no missing values: a NaN is 0
    {"objective": "huber", "num_leaves": 63, "min_child_samples": 1},
])
def test_a_booster_walked_in_numpy_predicts_what_lightgbm_predicts_to_the_bit(params: dict, tmp_path: Path) -> None:
    from lightgbm import LGBMRegressor

    from tracker.fingerprint.train import LGBM_PARAMS

    rng = np.random.default_rng(len(params))
    scales = np.array([1e-3, 1.0, 1e6, 1.0, 1e9, 30.0])
    x = rng.normal(size=(300, 6)) * scales
    x[rng.random(x.shape) < 0.15] = np.nan
    x[:, 3] = np.where(rng.random(300) < 0.4, 0.0, np.round(x[:, 3]))  # a count, often 0
    y = np.nan_to_num(x[:, 0]) * 1e3 + np.nan_to_num(x[:, 3]) + np.log1p(np.abs(np.nan_to_num(x[:, 4]))) \
        + rng.normal(size=300)
    fitted = LGBMRegressor(**{**LGBM_PARAMS, **params}).fit(x, y).booster_
    path = tmp_path / "booster.txt"
    fitted.save_model(str(path))
    read = runtime.read_booster(str(path))
    assert isinstance(read, runtime.TextBooster) and read.num_feature() == 6 and read.num_trees() == 500
    q = np.vstack([_queries(rng, 400, 6, scales), x])
    walked = read.predict_in_numpy(q)
    assert np.array_equal(walked, fitted.predict(q))  # the same float64s, not merely close
    # the branch each rule decides is taken: without the zero threshold or with NaN as 0 everywhere, they differ
    assert np.array_equal(read.predict(q[:3]), walked[:3])  # LightGBM loaded here: its own predict, the same
    assert read.model_to_string() == path.read_text()
    again = pickle.loads(pickle.dumps(read))  # as LightGBM's booster pickles: a served model sent to a worker
    assert isinstance(again, runtime.TextBooster) and np.array_equal(again.predict_in_numpy(q), walked)
    with pytest.raises(ValueError, match=r"number of features in data \(5\) is not the same as it was in training data \(6\)"):
        read.predict(q[:, :5])


def test_a_model_the_walk_does_not_cover_is_read_by_lightgbm(tmp_path: Path) -> None:
    """Linear trees, categorical splits, an objective whose output LightGBM transforms, a random forest's
    averaged trees: LightGBM's own booster, which predicts them as they were fitted."""
    import lightgbm

    rng = np.random.default_rng(3)
    x = np.column_stack([rng.integers(0, 5, 200), rng.random(200) + 0.1]).astype(float)
    y = x[:, 0] * 2 + x[:, 1]
    for params, data in (({"linear_tree": True}, {}), ({"objective": "poisson"}, {}),
                         ({"objective": "regression", "reg_sqrt": True}, {}),
                         ({"boosting": "rf", "bagging_freq": 1, "bagging_fraction": 0.5}, {}),
                         ({"min_data_per_group": 1, "cat_smooth": 1}, {"categorical_feature": [0]})):
        fitted = lightgbm.train({"verbose": -1, "min_data_in_leaf": 5, **params}, lightgbm.Dataset(x, y, **data),
                                num_boost_round=5)
        path = tmp_path / "booster.txt"
        fitted.save_model(str(path))
        read = runtime.read_booster(str(path))
        assert isinstance(read, lightgbm.Booster), params
        assert np.array_equal(read.predict(x), fitted.predict(x)), params
    # a text that is no model at all is LightGBM's to say so, as before
    path.write_text("not a booster\n" + path.read_text())
    with pytest.raises(lightgbm.basic.LightGBMError, match="Unknown model format"):
        runtime.read_booster(str(path))


def test_a_model_text_cut_short_is_an_error_saying_where_not_the_end_of_the_process(tmp_path: Path) -> None:
    """LightGBM 4.7's reader ends the process on a model text cut in a tree ("terminate called without an
    active exception", a core dump where ``tracker predict`` says a line): the text is read first, and one cut
    short, or damaged in a tree, is a ValueError naming the tree, whether its trees are walked in numpy or not."""
    import lightgbm

    rng = np.random.default_rng(4)
    x = rng.random((200, 3))
    path = tmp_path / "booster.txt"
    for params in ({}, {"linear_tree": True}):
        text = lightgbm.train({"verbose": -1, "min_data_in_leaf": 5, **params},
                              lightgbm.Dataset(x, x[:, 0] * 3 + x[:, 1]), num_boost_round=20).model_to_string()
        trees = text.split("end of trees")[0]
        cut_in_a_tree = text[: trees.index("Tree=10") + trees[trees.index("Tree=10"):].index("leaf_value") + 20]
        for damaged, said in ((cut_in_a_tree, r"cut short: 11 whole or partial trees of 20, no end of trees"),
                              (trees.rstrip("\n"), r"cut short: 20 whole or partial trees of 20, no end of trees"),
                              (text[: text.index("Tree=0")], r"cut short: 0 whole or partial trees of 20"),
                              (text.replace("\nTree=2\n", "\nTree=2\nsplit_feature\n", 1), r"damaged in tree 2 of 20"),
                              (text.replace("left_child=", "left_child=99 ", 1), r"damaged in tree 0 of 20 \(left_child not \d+ numbers\)"),
                              (text.replace("threshold=", "threshold=x", 1), r"damaged in tree 0 of 20 \(threshold not"),
                              (re.sub(r"\nTree=3\n(.*\n)*?right_child=-?\d+", lambda m: m[0].rsplit("=", 1)[0] + "=99", text,
                                      count=1), r"damaged in tree 3 of 20 \(a split's feature or child out of range\)")):
            path.write_text(damaged)
            with pytest.raises(ValueError, match=said):
                runtime.read_booster(str(path))
        path.write_text(text)
        assert np.array_equal(runtime.read_booster(str(path)).predict(x), lightgbm.Booster(model_str=text).predict(x))


def test_a_booster_read_and_predicted_in_a_new_process_never_loads_lightgbm(tmp_path: Path) -> None:
    """``tracker predict`` in a new process spent 1.5 of its 2.2 s importing LightGBM and the scikit-learn it
    imports (until 0.9.35): a fingerprint's booster and a layer model's (600 trees, a network's module calls)
    answer without it, with the numbers LightGBM gives."""
    from lightgbm import LGBMRegressor

    from tracker.fingerprint.layers import LAYER_PARAMS

    rng = np.random.default_rng(7)
    x = rng.random((500, 12)) * 100
    fitted = LGBMRegressor(**LAYER_PARAMS).fit(x, np.log(x[:, 0] + x[:, 1] * x[:, 2] + 1)).booster_
    fitted.save_model(str(tmp_path / "booster.txt"))
    q = rng.random((168, 12)) * 120  # mobilenet_v3_large's module calls, some past what was learnt
    np.save(tmp_path / "q.npy", q)
    code = ("import sys, numpy as np; from tracker.fingerprint.runtime import read_booster; "
            f"b = read_booster({str(tmp_path / 'booster.txt')!r}); q = np.load({str(tmp_path / 'q.npy')!r}); "
            f"np.save({str(tmp_path / 'p.npy')!r}, np.concatenate([b.predict(q[:1]), b.predict(q)])); "
            "print(type(b).__name__, 'lightgbm' in sys.modules, 'sklearn' in sys.modules)")
    said = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert said.stdout.split() == ["TextBooster", "False", "False"], said.stderr
    assert np.array_equal(np.load(tmp_path / "p.npy"), fitted.predict(np.vstack([q[:1], q])))
