"""The engine: one pipeline every experiment goes through (job, artifacts, analyses, verdict),
the runner and slots that schedule jobs, the stages the pipeline calls and the run's session.
Plain Python: the pytest face hands it what it needs."""
