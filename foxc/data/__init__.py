"""Market data: the snapshot record, readers, validation, labels and the synthetic default."""
