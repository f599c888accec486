"""Python logging → ``window/logMessage``, safe to call from any thread."""

from __future__ import annotations

import logging

from lsprotocol import types

from .host import Host

#: Loggers whose records reach the editor's log.
FORWARDED = ("tensorviz_lsp", "discovery", "capture", "viewer")

_LEVELS = (
    (logging.ERROR, types.MessageType.Error),
    (logging.WARNING, types.MessageType.Warning),
    (logging.INFO, types.MessageType.Info),
    (0, types.MessageType.Log),
)


class LspLogHandler(logging.Handler):
    def __init__(self, server: Host, level: int = logging.INFO) -> None:
        super().__init__(level)
        self.server = server
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = self.format(record)
            kind = next(t for lvl, t in _LEVELS if record.levelno >= lvl)
            self.server.log_message(message, kind)
        except Exception:  # never let logging take the server down
            self.handleError(record)


def install(server: Host, level: int = logging.INFO) -> LspLogHandler:
    handler = LspLogHandler(server, level)
    for name in FORWARDED:
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        # window/logMessage is their one channel: also passing them on to the root's
        # stderr handler put every warning twice in the editor's log (Neovim's lsp.log
        # records stderr as well). stderr keeps what nothing else reports (pygls).
        logger.propagate = False
        if logger.level == logging.NOTSET or logger.level > level:
            logger.setLevel(level)
    return handler
