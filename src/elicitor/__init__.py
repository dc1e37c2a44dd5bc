"""elicitor: Model Context Protocol elicitation, end to end."""

from ._version import __version__

__all__ = ["__version__"]
