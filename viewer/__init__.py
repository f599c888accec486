"""Graph projection, the loopback viewer server and the browser app."""
