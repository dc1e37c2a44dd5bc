"""Coverage-guided fuzzing of every parser of peer input (atheris). See ``fuzz/run.py`` and ``make fuzz``."""
