"""`python -m fleet_data.flows.cli ...`: the `fleet` command."""

import sys

from . import main

sys.exit(main())
