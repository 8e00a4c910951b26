"""The wording-only policy: does the request's wording alone give the task's decision away?

A task whose decision (`task.to_json()["decision"]`: allowed or forbidden, or any
categorical outcome the agent must infer from the records) can be predicted from the words
the customer used lets a policy skip the records. The check fits a bag-of-words classifier
(logistic regression over the words and word pairs of what the user says in the opening
observation) on train seeds and scores it on test seeds: it may not beat the majority class
by more than `MAX_GAIN` of the episodes. Telling a leak of +0.10 from one of +0.05 takes
about 2,000 tasks each way; 250 cannot.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

MAX_GAIN = 0.05
_TOKEN = re.compile(r"[a-z]+|\d+")


def request_text(messages: list[dict]) -> str:
    """What the user says in a conversation (for an opening observation: the request)."""
    return "\n".join(m["content"] for m in messages if m["role"] == "user" and m.get("content"))


def features(text: str) -> set[str]:
    """The words and the pairs of adjacent words of `text`, lower-cased."""
    words = _TOKEN.findall(text.lower())
    return {*words, *(f"{a} {b}" for a, b in zip(words, words[1:]))}


class WordingClassifier:
    """Logistic regression (softmax over the decisions, L2-regularised, full-batch Adam for a
    fixed number of steps from zero weights, so the same data gives the same model) over the
    features whose presence goes with the decision on the training texts: a chi-square test
    per feature, kept at p < 1e-4 (an id or a name seen in a few texts is noise, and a model
    fitted to noise predicts worse than the majority class, hiding a real leak). Naive Bayes
    is no judge here: the texts are templates whose words go together, and it came out far
    below the majority class on texts that leak nothing."""

    def __init__(self, examples: list[tuple[set[str], str]], min_count: int = 5, l2: float = 1e-3,
                 steps: int = 300, learning_rate: float = 0.1) -> None:
        self.labels = sorted({label for _, label in examples})
        self.vocabulary = {f: i for i, f in enumerate(_associated(examples, self.labels, min_count))}
        x = self._matrix([feats for feats, _ in examples])                      # (n, V)
        y = np.zeros((len(examples), len(self.labels)))                          # (n, K)
        y[np.arange(len(examples)), [self.labels.index(label) for _, label in examples]] = 1.0
        self.w = np.zeros((x.shape[1], len(self.labels)))                        # (V, K)
        self.b = np.zeros(len(self.labels))                                      # (K,)
        moments = [np.zeros_like(self.w), np.zeros_like(self.w), np.zeros_like(self.b), np.zeros_like(self.b)]
        for t in range(1, steps + 1):
            error = (_softmax(x @ self.w + self.b) - y) / len(examples)         # (n, K)
            grads = (x.T @ error + l2 * self.w, error.sum(axis=0))
            for i, (param, grad) in enumerate(zip((self.w, self.b), grads)):
                m, v = moments[2 * i], moments[2 * i + 1]
                m *= 0.9
                m += 0.1 * grad
                v *= 0.999
                v += 0.001 * grad * grad
                param -= learning_rate * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)

    def _matrix(self, texts: list[set[str]]) -> np.ndarray:
        x = np.zeros((len(texts), len(self.vocabulary)))
        for row, feats in enumerate(texts):
            x[row, [self.vocabulary[f] for f in feats if f in self.vocabulary]] = 1.0
        return x

    def predict(self, texts: list[set[str]]) -> list[str]:
        """The predicted label of each text (ties go to the label sorted first)."""
        scores = self._matrix(texts) @ self.w + self.b
        return [self.labels[i] for i in scores.argmax(axis=1)]  # ties: the label sorted first


def _associated(examples: list[tuple[set[str], str]], labels: list[str], min_count: int) -> list[str]:
    """The features (in at least `min_count` texts) whose presence is not independent of the
    label: Pearson's chi-square over the 2 x K table, above the p = 1e-4 critical value."""
    totals = np.array([sum(1 for _, label in examples if label == c) for c in labels], dtype=float)
    counts: dict[str, np.ndarray] = {}
    for feats, label in examples:
        k = labels.index(label)
        for f in feats:
            counts.setdefault(f, np.zeros(len(labels)))[k] += 1
    df = max(1, len(labels) - 1)
    z = 3.719  # the normal quantile of 1 - 1e-4; Wilson and Hilferty's approximation below
    critical = df * (1 - 2 / (9 * df) + z * (2 / (9 * df)) ** 0.5) ** 3
    n = totals.sum()
    out = []
    for f in sorted(counts):
        present = counts[f]
        if present.sum() < min_count or present.sum() == n:
            continue
        table = np.stack([present, totals - present])                            # (2, K)
        expected = table.sum(axis=1, keepdims=True) * totals / n
        if ((table - expected) ** 2 / np.maximum(expected, 1e-12)).sum() > critical:
            out.append(f)
    return out


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


@dataclass(frozen=True)
class WordingResult:
    """How well a classifier on the request's wording alone predicts a task's decision, against the
    majority class."""

    classifier: float
    """Accuracy of the classifier on the test tasks."""
    majority: float
    """Accuracy of always predicting the train tasks' most common decision."""
    tested: int
    trained: int

    @property
    def gain(self) -> float:
        """The classifier's accuracy over the majority class's."""
        return self.classifier - self.majority

    def describe(self) -> str:
        """The result in a line, for a property's detail."""
        return (f"wording-only classifier {self.classifier:.3f} vs majority class {self.majority:.3f} "
                f"on {self.tested} test tasks (fitted on {self.trained}): {self.gain:+.3f}")


def wording_leak(train: list[tuple[str, str]], test: list[tuple[str, str]]) -> WordingResult:
    """Fit on (text, decision) pairs of `train`, score on `test`."""
    model = WordingClassifier([(features(text), label) for text, label in train])
    majority = Counter(label for _, label in train).most_common(1)[0][0]
    predicted = model.predict([features(text) for text, _ in test])
    hits = sum(p == label for p, (_, label) in zip(predicted, test))
    base = sum(label == majority for _, label in test)
    return WordingResult(hits / len(test), base / len(test), len(test), len(train))
