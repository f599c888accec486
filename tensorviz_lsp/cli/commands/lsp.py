"""``tensorviz lsp``: the language server over stdio (or TCP for debugging)."""

from __future__ import annotations

import argparse
import logging
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lsp", help="run the language server (stdio)")
    p.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    p.add_argument("--tcp", metavar="PORT", type=int, help="listen on 127.0.0.1:PORT instead (debugging)")
    p.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="what reaches the editor's log (window/logMessage) and stderr",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ...lsplog import install
    from ...wiring import create_server

    level = getattr(logging, args.log_level.upper())
    # stderr is the editor's server log; stdout is the protocol and must stay clean.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="tensorviz: %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.setLevel(logging.WARNING)
    server = create_server()
    install(server, level)
    if args.tcp:
        server.start_tcp("127.0.0.1", args.tcp)
    else:
        from ...framing import serve_stdio

        serve_stdio(server)
    return 0
