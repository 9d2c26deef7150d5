"""perf_model_tree: gradient-boosted regression trees in NumPy, small enough to read.

The learned half of the performance model (perf_model.py) fits the log of
measured time over the roofline's prediction with this: a sum of shallow
regression trees, each fitted to what the trees before it left unexplained
(the residuals of the squared loss), shrunk by a learning rate.

It is a *histogram* booster, as LightGBM and scikit-learn's
HistGradientBoostingRegressor are: each feature is cut once into at most
``bins`` quantile bins, and a node finds its best split by summing the
residuals per bin (np.bincount) instead of sorting its rows, so that a few
thousand rows and a few hundred trees train in seconds.

A model is plain lists (feature, threshold, children, leaf values), saved
as JSON: nothing is pickled, and a model trained on one machine loads on
any other. scikit-learn is not needed (perf_model.py uses it only if asked).

    booster = Booster(trees=300, depth=4).fit(x, y)
    booster.predict(x_new)
    Booster.from_dict(json.loads(json.dumps(booster.to_dict())))
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np


class Tree:
    """One regression tree, as flat arrays: node i splits on feature[i] at
    threshold[i] (rows with x <= threshold go to left[i], the others to
    right[i]), or is a leaf (feature[i] == -1) predicting value[i]."""

    def __init__(self) -> None:
        self.feature: list[int] = []
        self.threshold: list[float] = []
        self.left: list[int] = []
        self.right: list[int] = []
        self.value: list[float] = []

    def _add(self, value: float) -> int:
        self.feature.append(-1)
        self.threshold.append(0.0)
        self.left.append(-1)
        self.right.append(-1)
        self.value.append(value)
        return len(self.value) - 1

    def predict(self, x: np.ndarray) -> np.ndarray:
        node = np.zeros(len(x), dtype=np.int64)
        feature = np.asarray(self.feature)
        threshold = np.asarray(self.threshold)
        left, right = np.asarray(self.left), np.asarray(self.right)
        while True:
            split = feature[node] >= 0
            if not split.any():
                return np.asarray(self.value)[node]
            rows = np.nonzero(split)[0]
            f = feature[node[rows]]
            go_left = x[rows, f] <= threshold[node[rows]]
            node[rows] = np.where(go_left, left[node[rows]], right[node[rows]])


class Booster:
    """Gradient boosting with squared loss: prediction = base + rate * sum of trees."""

    def __init__(self, trees: int = 300, depth: int = 4, rate: float = 0.08, min_leaf: int = 8,
                 bins: int = 48, l2: float = 1.0) -> None:
        self.n_trees, self.depth, self.rate = trees, depth, rate
        self.min_leaf, self.bins, self.l2 = min_leaf, bins, l2
        self.base = 0.0
        self.trees: list[Tree] = []

    # ---- fitting ---------------------------------------------------------------------------

    def fit(self, x: np.ndarray, y: np.ndarray) -> "Booster":
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if x.ndim != 2 or len(x) != len(y) or len(y) == 0:
            raise ValueError(f"Booster.fit: x must be (rows, features) and y (rows,), got {x.shape} and {y.shape}")
        # The candidate thresholds of each feature: the edges between its quantile bins.
        self._edges = [np.unique(np.quantile(col, np.linspace(0, 1, self.bins + 1)[1:-1])) for col in x.T]
        binned = np.stack([np.searchsorted(e, col, side="left") for e, col in zip(self._edges, x.T)], axis=1)
        self.base = float(y.mean())
        prediction = np.full(len(y), self.base)
        self.trees = []
        for _ in range(self.n_trees):
            residual = y - prediction
            tree = Tree()
            self._grow(tree, binned, residual, np.arange(len(y)), self.depth)
            self.trees.append(tree)
            prediction += self.rate * tree.predict(x)
        return self

    def _leaf_value(self, residual: np.ndarray) -> float:
        # The L2-shrunk mean: a leaf of few rows moves less.
        return float(residual.sum() / (len(residual) + self.l2))

    def _grow(self, tree: Tree, binned: np.ndarray, residual: np.ndarray, rows: np.ndarray, depth: int) -> int:
        node = tree._add(self._leaf_value(residual[rows]))
        if depth == 0 or len(rows) < 2 * self.min_leaf:
            return node
        best = self._best_split(binned[rows], residual[rows])
        if best is None:
            return node
        feature, bin_index = best
        go_left = binned[rows, feature] <= bin_index
        tree.feature[node] = feature
        tree.threshold[node] = float(self._edges[feature][bin_index])
        tree.left[node] = self._grow(tree, binned, residual, rows[go_left], depth - 1)
        tree.right[node] = self._grow(tree, binned, residual, rows[~go_left], depth - 1)
        return node

    def _best_split(self, binned: np.ndarray, residual: np.ndarray) -> Optional[tuple[int, int]]:
        """The (feature, bin) whose split x <= edge[bin] most lowers the squared
        error: the split maximising sum_L^2 / n_L + sum_R^2 / n_R."""
        total, count = residual.sum(), len(residual)
        best_gain, best = total * total / (count + self.l2) + 1e-12, None
        for f in range(binned.shape[1]):
            edges = len(self._edges[f])
            if edges == 0:
                continue
            sums = np.bincount(binned[:, f], weights=residual, minlength=edges + 1)[:edges]
            counts = np.bincount(binned[:, f], minlength=edges + 1)[:edges]
            left_sum, left_n = np.cumsum(sums), np.cumsum(counts)
            right_sum, right_n = total - left_sum, count - left_n
            ok = (left_n >= self.min_leaf) & (right_n >= self.min_leaf)
            if not ok.any():
                continue
            gain = np.where(ok, left_sum**2 / (left_n + self.l2) + right_sum**2 / (right_n + self.l2), -np.inf)
            b = int(np.argmax(gain))
            if gain[b] > best_gain:
                best_gain, best = float(gain[b]), (f, b)
        return best

    # ---- using -----------------------------------------------------------------------------

    def predict(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        out = np.full(len(x), self.base)
        for tree in self.trees:
            out += self.rate * tree.predict(x)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"base": self.base, "rate": self.rate,
                "trees": [{"feature": t.feature, "threshold": t.threshold, "left": t.left, "right": t.right,
                           "value": t.value} for t in self.trees]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Booster":
        booster = cls(trees=len(data["trees"]), rate=float(data["rate"]))
        booster.base = float(data["base"])
        for saved in data["trees"]:
            tree = Tree()
            tree.feature = [int(v) for v in saved["feature"]]
            tree.threshold = [float(v) for v in saved["threshold"]]
            tree.left = [int(v) for v in saved["left"]]
            tree.right = [int(v) for v in saved["right"]]
            tree.value = [float(v) for v in saved["value"]]
            booster.trees.append(tree)
        return booster
