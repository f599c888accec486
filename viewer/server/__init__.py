"""The loopback viewer server (:mod:`.app`): HTTP API, static files, push events,
source serving policy and diff mode."""
