"""pytest-faultloop: inject faults into distributed training jobs and score failure attribution."""

__version__ = "0.1.0"
