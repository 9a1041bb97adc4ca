"""Repository-level pytest configuration.

``pytest experiments/`` runs fault pools; ``pytest tests/`` runs the project's own tests. A site
plugs its own attribution modules in here (or in ``experiments/conftest.py``) by implementing
the ``pytest_faultloop_*`` hooks of ``pytest_faultloop/plugin/hookspecs.py``; see the README.
"""

collect_ignore = ["sbatch", "bench", "scripts"]
