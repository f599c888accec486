"""The projection's request errors, apart so that its parts (the line index) can raise them
without importing the projection that builds them."""

from __future__ import annotations


class ProjectionError(Exception):
    """A request the projection cannot answer; ``status`` is the HTTP status to use."""

    status = 400


class NotFound(ProjectionError):
    status = 404
