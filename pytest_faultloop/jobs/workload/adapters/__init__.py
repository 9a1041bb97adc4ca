"""The fault injector on the frameworks' own hooks: a Lightning ``Callback``, a Transformers
``TrainerCallback``, and what a Ray Train worker needs. Each module imports its framework."""
