"""Labelled evaluation and calibration fitting (``ragsift eval`` / ``ragsift calibrate``)."""

from ragsift.evaluation.beir import is_beir_folder, load_beir
from ragsift.evaluation.dataset import EvalQuery, LabelledSet, select_half
from ragsift.evaluation.report import Evaluation, ScorerReport, evaluate_scorers
from ragsift.evaluation.runner import RetrievalRun, run_retrieval
from ragsift.evaluation.scoring import fit_from_run
from ragsift.evaluation.squad import load_squad

__all__ = [
    "EvalQuery",
    "Evaluation",
    "LabelledSet",
    "RetrievalRun",
    "ScorerReport",
    "evaluate_scorers",
    "fit_from_run",
    "is_beir_folder",
    "load_beir",
    "load_squad",
    "run_retrieval",
    "select_half",
]
