"""Labelled evaluation and calibration fitting (``ragsift eval`` / ``ragsift calibrate``)."""

from ragsift.evaluation.dataset import EvalQuery, LabelledSet, load_squad
from ragsift.evaluation.runner import RetrievalRun, run_retrieval
from ragsift.evaluation.scoring import ScorerReport, evaluate_scorers, fit_from_run

__all__ = [
    "EvalQuery",
    "LabelledSet",
    "RetrievalRun",
    "ScorerReport",
    "evaluate_scorers",
    "fit_from_run",
    "load_squad",
    "run_retrieval",
]
