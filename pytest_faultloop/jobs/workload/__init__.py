"""The built-in CPU workload ``tiny_gloo``: a launcher per emulated node forking its ranks."""
