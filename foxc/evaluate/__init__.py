"""A policy evaluated over a data window with learning off, its figures, the yardsticks and the run's policy."""
from .metrics import summarize
from .runner import EVAL_TRADE_DTYPE, EvalConfig, Evaluation, Evaluator, PolicyContext, chunk_bounds, evaluate

__all__ = ["EVAL_TRADE_DTYPE", "EvalConfig", "Evaluation", "Evaluator", "PolicyContext", "chunk_bounds", "evaluate",
           "summarize"]
