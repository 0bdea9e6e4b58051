"""Market data: the snapshot record, readers, validation, labels and the synthetic default."""
from .validate import DataError, ValidationConfig, ValidationReport

__all__ = ["DataError", "ValidationConfig", "ValidationReport"]
