"""The perturbation catalogue: the rewrites real log pipelines and dump collection apply to a
failure's artifacts, each leaving its ground truth unchanged (``catalogue``), composed with
``+`` (``ts+ansi``), and the perturbed copies replays score beside the originals (``copies``)."""
