"""Backends run an experiment's job: ``local`` (processes on this machine) or ``slurm``."""
