"""Load from several client hosts in one session, through torch.distributed's TCPStore."""
