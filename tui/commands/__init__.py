"""The commands of `gpuscale-tui`, one module each: ``add_parser`` adds its flags to the command
line's parser (tui/cli.py) and ``run`` carries it out. Their imports at the top are argparse and
the standard library only, so --help stays instant; each command loads its engine when it runs."""
