"""Sockets and framings: HTTP/1.1, HTTP/2, TCP groups, stamped reads, the connection
seam. No Triton and no profile: nothing here imports the rest of the engine."""
