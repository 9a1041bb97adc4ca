"""Workloads on the frameworks users train with, each started by that framework's own launcher
(``registry``), each a small model on CPU/gloo with the fault injector in its loop."""
