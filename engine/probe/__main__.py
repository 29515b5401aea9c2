import sys

from engine.probe.cli import main

sys.exit(main())
