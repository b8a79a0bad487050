"""The gateway relay: holds the Discord gateway connection and POSTs dispatch frames to /webhook."""
