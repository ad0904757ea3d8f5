"""``python -m zkconsumer`` runs the CLI."""

import sys

from zkconsumer.cli import main

sys.exit(main())
