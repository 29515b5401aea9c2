"""One module per transport of the TRANSPORTS table (engine/transports.py), each exposing
``TRANSPORT`` (engine/load/transport.py says what it does). Load workers import them: keep their
top-level imports light (the session's side imports numpy where it needs it)."""
